import type { ChildProcess, StdioOptions } from 'node:child_process';
import { temporal } from '@temporalio/proto';
import { inject } from 'vitest';
import { spawnWorker } from '../../scripts/processes';
import { eventually, settledHistory, TEST_SECRETS_KEY, type TestKeel } from './keel';

/**
 * A Keel worker as a process of its own (worker/main.ts) on the test Keel's task queue, with the scripted model and
 * the run's workflow bundle. The caller stops it (scripts/processes.ts `stopProcess`) or kills it.
 */
export function startWorkerProcess(
  keel: TestKeel,
  databaseUrl: string,
  env: Record<string, string> = {},
  stdio: StdioOptions = ['ignore', 'ignore', 'inherit'],
): ChildProcess {
  return spawnWorker(
    {
      ...process.env,
      DATABASE_URL: databaseUrl,
      TEMPORAL_ADDRESS: inject('temporalAddress'),
      KEEL_TASK_QUEUE: keel.taskQueue,
      KEEL_WORKFLOW_BUNDLE: inject('workflowBundlePath'),
      KEEL_MODEL: 'scripted',
      // Tests allow loopback explicitly: their receivers and fakes listen on 127.0.0.1.
      KEEL_EGRESS_ALLOW: 'loopback',
      KEEL_SECRETS_KEY: TEST_SECRETS_KEY,
      ...env,
    },
    stdio,
  );
}

/** A worker process's Temporal identity (the SDK's default: `<pid>@<host>`), as histories record it. */
export const identityOf = (child: ChildProcess): string => `${child.pid}@`;

/**
 * Waits until every one of these worker processes polls the task queue for both workflow and activity tasks, so
 * that what the test starts next can land on any of them (a worker still starting would leave it all to the other).
 */
export async function waitForPollers(keel: TestKeel, workers: readonly ChildProcess[]): Promise<void> {
  const { TASK_QUEUE_TYPE_WORKFLOW, TASK_QUEUE_TYPE_ACTIVITY } = temporal.api.enums.v1.TaskQueueType;
  await eventually(
    async () => {
      for (const taskQueueType of [TASK_QUEUE_TYPE_WORKFLOW, TASK_QUEUE_TYPE_ACTIVITY]) {
        const { pollers } = await keel.client.workflowService.describeTaskQueue({
          namespace: 'default',
          taskQueue: { name: keel.taskQueue },
          taskQueueType,
        });
        const identities = (pollers ?? []).map((p) => p.identity ?? '');
        if (!workers.every((w) => identities.some((id) => id.startsWith(identityOf(w))))) return false;
      }
      return true;
    },
    60_000,
    'every worker process to poll the task queue',
  );
}

/** The identities of the workers that ran the activities of this type in a workflow's history (one per activity). */
export async function activityWorkers(keel: TestKeel, workflowId: string, activityType: string): Promise<string[]> {
  const history = await keel.client.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  const scheduled = new Map<string, string>();
  const workers: string[] = [];
  for (const e of events) {
    const s = e.activityTaskScheduledEventAttributes;
    if (s?.activityType?.name) scheduled.set(String(e.eventId), s.activityType.name);
    const started = e.activityTaskStartedEventAttributes;
    const startedType = started && scheduled.get(String(started.scheduledEventId));
    if (started && startedType === activityType) workers.push(started.identity ?? '');
  }
  return workers;
}

/**
 * A workflow's local activities of one type, in order: the attempt each ended on (from its marker), and the worker
 * that ran it (the identity of the workflow task that recorded the marker). A settled history: see settledHistory.
 */
export async function localStepsOf(
  keel: TestKeel,
  workflowId: string,
  activityType: string,
): Promise<{ attempt: number; identity: string }[]> {
  const history = await settledHistory(keel, workflowId);
  const events = history.events ?? [];
  const identityOf = new Map(events.map((e) => [String(e.eventId), e.workflowTaskCompletedEventAttributes?.identity]));
  return events.flatMap((e) => {
    const marker = e.markerRecordedEventAttributes;
    const data = marker?.markerName === 'core_local_activity' ? marker.details?.data?.payloads?.[0]?.data : undefined;
    if (!data) return [];
    const step = JSON.parse(Buffer.from(data).toString()) as { activity_type?: string; attempt?: number };
    if (step.activity_type !== activityType) return [];
    const identity = identityOf.get(String(marker!.workflowTaskCompletedEventId)) ?? '';
    return [{ attempt: step.attempt ?? 1, identity }];
  });
}
