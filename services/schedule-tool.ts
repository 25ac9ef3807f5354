import type { Client } from '@temporalio/client';
import * as jobsDb from '../db/jobs';
import type { Pool } from '../db/pool';
import { NewJob, type ScheduleToolInput } from '../domain/jobs';
import type { JobSettings } from './job-settings';
import { createJob, deleteJob, pauseJob, resumeJob, runJobNow, type JobResult } from './jobs';

/**
 * The agent's `schedule` tool: the same job functions, and the same validation, as the API's job routes. Its answer
 * is for the model, in words.
 */
export type ToolAnswer = { text: string; isError: boolean };

const describeJob = (j: jobsDb.JobRow) => `${j.name} (id ${j.id}, ${j.status}, next run ${j.nextRunAt ?? 'none'})`;

/** The tool's answer for the model, in words; rule errors name the field and the rule, as the API does. */
export async function scheduleTool(
  pool: Pool,
  client: Client,
  s: JobSettings,
  agentId: string,
  input: ScheduleToolInput,
): Promise<ToolAnswer> {
  const answer = <T>(r: JobResult<T>, ok: (v: T) => string): ToolAnswer =>
    r.ok ? { text: ok(r.value), isError: false } : { text: r.error.message, isError: true };
  if (input.action === 'list') {
    const jobs = await jobsDb.listJobs(pool, agentId);
    return { text: jobs.length ? jobs.map(describeJob).join('\n') : 'no scheduled jobs', isError: false };
  }
  if (input.action === 'create') {
    const { name, description, schedule, task, delivery, deleteAfterRun } = input;
    const parsed = NewJob.safeParse({ name, description, schedule, task, delivery, deleteAfterRun });
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
      return { text: `cannot create the job: ${issues}`, isError: true };
    }
    const created = await createJob(pool, client, s, agentId, parsed.data, 'agent');
    return answer(created, (j) => `created job ${describeJob(j)}`);
  }
  const job = input.jobId
    ? await jobsDb.getJob(pool, agentId, input.jobId)
    : input.name
      ? await jobsDb.findJobByName(pool, agentId, input.name)
      : undefined;
  if (!job) return { text: `no job ${input.jobId ?? input.name ?? '(give jobId or name)'}`, isError: true };
  switch (input.action) {
    case 'delete':
      return answer(await deleteJob(pool, client, agentId, job.id, 'agent'), () => `deleted job ${job.name}`);
    case 'run': {
      const started = await runJobNow(pool, client, s, agentId, job.id, 'agent');
      return answer(started, () => `job ${job.name} started; its result goes to its delivery`);
    }
    case 'pause':
      return answer(await pauseJob(pool, client, agentId, job.id, 'agent'), (j) => `paused ${describeJob(j)}`);
    case 'resume':
      return answer(await resumeJob(pool, client, agentId, job.id, 'agent'), (j) => `resumed ${describeJob(j)}`);
  }
}
