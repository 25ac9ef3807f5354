/**
 * Routine management, for the API, and the guard against a run its workflow abandoned, for the run activity too: a
 * routine is a row in PostgreSQL and a Temporal Schedule, changed together. The API's reads of a routine's runs,
 * transcript and tools, and a person's decision on a run waiting for approval, are here too. Every function takes
 * (pool, client, …) in that order.
 */
import {
  ScheduleNotFoundError,
  ScheduleOverlapPolicy,
  type Client,
  type ScheduleOptions,
  type ScheduleOptionsStartWorkflowAction,
} from '@temporalio/client';
import { decideApproval, ROUTINE_RUN_WORKFLOW, type RoutineRunWorkflow } from '../contracts/routine-run';
import { getApp } from '../db/apps';
import { listMessages, type TranscriptView } from '../db/conversations';
import type { PageRequest } from '../db/page';
import { inTransaction, type Pool } from '../db/pool';
import * as routineRunsDb from '../db/routine-runs';
import { listTools, type SavedToolRow } from '../db/routine-tools';
import * as routinesDb from '../db/routines';
import { conversationWorkflowId, routineConversationId, routineScheduleId } from '../domain/ids';
import { checkRoutineSchedule, type RoutineDefinition } from '../domain/routines';
import { SA } from '../domain/search-attributes';
import { decisionAudit, submitDecision, type DecisionAnswer } from './approvals';
import { startActionNow } from './run-now';
import { workflowIsOpen } from './workflow-state';

// A read the API serves as it is, and the rows the API shows.
export { getArtifact } from '../db/artifacts';
export type { RoutineRunRow } from '../db/routine-runs';

export type RoutineRefusal = {
  code: 'not_found' | 'invalid_schedule' | 'routine_paused' | 'not_paused' | 'run_in_flight' | 'not_awaiting_approval';
  message: string;
  status: 400 | 404 | 409;
};
export type RoutineResult<T> = { ok: true; value: T } | { ok: false; error: RoutineRefusal };

export interface RoutineView extends routinesDb.RoutineRow {
  nextRunAt: string | null;
}

const refuse = (
  code: RoutineRefusal['code'],
  message: string,
  status: RoutineRefusal['status'],
): RoutineResult<never> => ({ ok: false, error: { code, message, status } });

/**
 * The Temporal Schedule of a routine: overlap SKIP for its own fires. Every fire, run-now included, also meets the
 * run's own guard (one run in flight per routine, unique in PostgreSQL), which records nothing for a fire that
 * overlaps.
 */
function scheduleOptions(
  r: routinesDb.RoutineRow,
  taskQueue: string,
): ScheduleOptions<ScheduleOptionsStartWorkflowAction<RoutineRunWorkflow>> {
  const id = routineScheduleId(r.agentId, r.appId, r.slug);
  return {
    scheduleId: id,
    spec: { cronExpressions: [r.cron], timezone: r.schedule.tz ?? 'UTC' },
    action: {
      type: 'startWorkflow',
      workflowType: ROUTINE_RUN_WORKFLOW,
      workflowId: id,
      taskQueue,
      args: [{ agentId: r.agentId, appId: r.appId, slug: r.slug }],
      typedSearchAttributes: [
        { key: SA.agentId, value: r.agentId },
        { key: SA.kind, value: 'routine' },
        { key: SA.routine, value: `${r.appId}/${r.slug}` },
      ],
      staticSummary: `Run of routine "${r.label}" (app ${r.appId})`,
    },
    policies: { overlap: ScheduleOverlapPolicy.SKIP },
    state: { paused: r.status === 'paused' },
    memo: { agent: r.agentId, app: r.appId, routine: r.slug },
  };
}

async function view(client: Client, r: routinesDb.RoutineRow): Promise<RoutineView> {
  const described = await client.schedule
    .getHandle(routineScheduleId(r.agentId, r.appId, r.slug))
    .describe()
    .catch(() => undefined);
  const next = r.status === 'active' ? described?.info.nextActionTimes[0] : undefined;
  return { ...r, nextRunAt: next?.toISOString() ?? null };
}

export async function getRoutineView(
  pool: Pool,
  client: Client,
  agentId: string,
  appId: string,
  slug: string,
): Promise<RoutineView | undefined> {
  const r = await routinesDb.getRoutine(pool, agentId, appId, slug);
  return r && view(client, r);
}

/**
 * An app's routines by slug, a page at a time, each with its next fire (its Schedules are asked at once); 404 when
 * there is no such app.
 */
export async function listRoutineViews(
  pool: Pool,
  client: Client,
  agentId: string,
  appId: string,
  page: PageRequest<string>,
): Promise<RoutineResult<RoutineView[]>> {
  if (!(await getApp(pool, agentId, appId))) return refuse('not_found', `app ${appId} not found`, 404);
  const routines = await routinesDb.listRoutines(pool, agentId, appId, page);
  return { ok: true, value: await Promise.all(routines.map((r) => view(client, r))) };
}

/**
 * Creates or edits a routine: the row and its Schedule both hold the new definition before this returns, or
 * neither changed. An edit keeps the routine's status; a run in flight never writes the definition back.
 */
export async function putRoutine(
  pool: Pool,
  client: Client,
  s: { taskQueue: string; floorMs: number },
  agentId: string,
  appId: string,
  slug: string,
  def: RoutineDefinition,
): Promise<RoutineResult<{ routine: RoutineView; created: boolean }>> {
  const verdict = checkRoutineSchedule(def.schedule.expr, def.schedule.tz ?? 'UTC', new Date(), s.floorMs);
  if (!verdict.ok) return refuse('invalid_schedule', verdict.error, 400);
  if (!(await getApp(pool, agentId, appId))) return refuse('not_found', `app ${appId} not found`, 404);
  const scheduleId = routineScheduleId(agentId, appId, slug);
  let createdSchedule = false;
  try {
    const put = await inTransaction(pool, async (db) => {
      // The zone as Temporal spells it (croner accepts `europe/paris`, Temporal only `Europe/Paris`).
      const schedule = { ...def.schedule, ...(def.schedule.tz ? { tz: verdict.tz } : {}) };
      const { routine, created } = await routinesDb.putRoutine(
        db,
        agentId,
        appId,
        slug,
        { ...def, schedule },
        verdict.cron,
      );
      const options = scheduleOptions(routine, s.taskQueue);
      if (created) {
        await client.schedule.create(options);
        createdSchedule = true;
      } else {
        await client.schedule
          .getHandle(scheduleId)
          .update((prev) => ({ ...prev, spec: options.spec, action: { ...prev.action, ...options.action } }));
      }
      return { routine, created };
    });
    return { ok: true, value: { routine: await view(client, put.routine), created: put.created } };
  } catch (err) {
    if (createdSchedule) {
      await client.schedule
        .getHandle(scheduleId)
        .delete()
        .catch(() => undefined);
    }
    throw err;
  }
}

async function withRoutine<T>(
  pool: Pool,
  agentId: string,
  appId: string,
  slug: string,
  fn: (r: routinesDb.RoutineRow) => Promise<RoutineResult<T>>,
): Promise<RoutineResult<T>> {
  const r = await routinesDb.getRoutine(pool, agentId, appId, slug);
  if (!r) return refuse('not_found', `routine ${slug} of app ${appId} not found`, 404);
  return fn(r);
}

/** An action on one routine of an app, by `actor` (a person's token): the Schedule is told who did it. */
type RoutineAction<T> = (
  pool: Pool,
  client: Client,
  agentId: string,
  appId: string,
  slug: string,
  actor: string,
) => Promise<RoutineResult<T>>;

/** Pause acts on the routine and its Schedule together; a paused routine does not fire (the run checks it too). */
export const pauseRoutine: RoutineAction<RoutineView> = (pool, client, agentId, appId, slug, actor) =>
  withRoutine(pool, agentId, appId, slug, async (r) => {
    if (r.status === 'paused') return refuse('routine_paused', `routine ${slug} is already paused`, 409);
    // The row first, so that a fire racing the pause finds it paused; the row goes back if the Schedule refuses.
    await routinesDb.setRoutineStatus(pool, agentId, appId, slug, 'active', 'paused');
    try {
      await client.schedule.getHandle(routineScheduleId(agentId, appId, slug)).pause(`paused by ${actor}`);
    } catch (err) {
      await routinesDb.setRoutineStatus(pool, agentId, appId, slug, 'paused', 'active');
      throw err;
    }
    return { ok: true, value: await view(client, { ...r, status: 'paused' }) };
  });

/** Resume unpauses the Schedule, then the routine. */
export const resumeRoutine: RoutineAction<RoutineView> = (pool, client, agentId, appId, slug, actor) =>
  withRoutine(pool, agentId, appId, slug, async (r) => {
    if (r.status !== 'paused') return refuse('not_paused', `routine ${slug} is not paused`, 409);
    // The Schedule first: if it cannot be unpaused, the row still says paused and a resume can be tried again. A fire
    // between the two finds the row paused and runs nothing.
    await client.schedule.getHandle(routineScheduleId(agentId, appId, slug)).unpause(`resumed by ${actor}`);
    await routinesDb.setRoutineStatus(pool, agentId, appId, slug, 'paused', 'active');
    return { ok: true, value: await view(client, { ...r, status: 'active' }) };
  });

/**
 * Run now: 409 when paused or when a run is in flight; the run starts with the action Keel gives the routine's
 * Schedule, without asking the Schedule for it (services/run-now.ts).
 */
export function runRoutineNow(
  pool: Pool,
  client: Client,
  s: { taskQueue: string },
  agentId: string,
  appId: string,
  slug: string,
): Promise<RoutineResult<{ triggered: true }>> {
  return withRoutine(pool, agentId, appId, slug, async (r) => {
    if (r.status === 'paused') return refuse('routine_paused', `routine ${slug} is paused: resume it first`, 409);
    const inFlight = await routineRunsDb.runInFlight(pool, agentId, appId, slug);
    if (inFlight && !(await abandonIfClosed(pool, client, inFlight))) {
      const what = inFlight.status === 'running' ? 'running' : 'waiting for approval';
      return refuse('run_in_flight', `run ${inFlight.runId} of routine ${slug} is still ${what}`, 409);
    }
    // Overlap is still refused: by the check above, and by the run itself, which finds any run in flight (unique in
    // PostgreSQL) and records nothing.
    await startActionNow(client, routineScheduleId(agentId, appId, slug), scheduleOptions(r, s.taskQueue).action);
    return { ok: true, value: { triggered: true } };
  });
}

export function deleteRoutine(
  pool: Pool,
  client: Client,
  agentId: string,
  appId: string,
  slug: string,
): Promise<RoutineResult<{ slug: string }>> {
  return withRoutine(pool, agentId, appId, slug, async () => {
    await client.schedule
      .getHandle(routineScheduleId(agentId, appId, slug))
      .delete()
      .catch((err: unknown) => {
        if (!(err instanceof ScheduleNotFoundError)) throw err;
      });
    await routinesDb.deleteRoutine(pool, agentId, appId, slug);
    return { ok: true, value: { slug } };
  });
}

/**
 * A run recorded as in flight whose workflow has ended without finishing it (terminated outside Keel) is closed as
 * abandoned, so that it does not block the routine. Answers whether it was; throws when Temporal cannot tell.
 */
export async function abandonIfClosed(pool: Pool, client: Client, run: routineRunsDb.RoutineRunRow): Promise<boolean> {
  if (await workflowIsOpen(client, run.workflowId, run.runId)) return false;
  const digest = 'abandoned: its workflow ended without finishing the run';
  await routineRunsDb.finishRun(pool, run.runId, { status: 'error', digest, artifactId: null });
  return true;
}

/** A routine's runs, newest first. */
export function listRoutineRuns(
  pool: Pool,
  agentId: string,
  appId: string,
  slug: string,
): Promise<RoutineResult<routineRunsDb.RoutineRunRow[]>> {
  return withRoutine(pool, agentId, appId, slug, async () => ({
    ok: true,
    value: await routineRunsDb.listRuns(pool, agentId, appId, slug),
  }));
}

/** A routine's transcript (its sessionId, a conversation of its own): each run's prompt and digest. */
export function routineTranscript(
  pool: Pool,
  agentId: string,
  appId: string,
  slug: string,
): Promise<RoutineResult<{ sessionId: string; messages: TranscriptView[] }>> {
  return withRoutine(pool, agentId, appId, slug, async () => {
    const sessionId = routineConversationId(appId, slug);
    const messages = await listMessages(pool, conversationWorkflowId(agentId, sessionId), 0, 1000);
    return { ok: true, value: { sessionId, messages } };
  });
}

/** A run of one of the agent's routines (another agent's run is not found). */
export async function getRoutineRun(
  pool: Pool,
  agentId: string,
  runId: string,
): Promise<routineRunsDb.RoutineRunRow | undefined> {
  const run = await routineRunsDb.getRun(pool, runId);
  return run && run.agentId === agentId ? run : undefined;
}

/**
 * A person approves or rejects the gated action of a run waiting for approval: the decision goes to the run's
 * workflow within `deadlineMs` and, once Temporal took it, into the audit trail. The answer says how it fared.
 */
export async function decideOnRoutineRun(
  pool: Pool,
  client: Client,
  deadlineMs: number,
  d: { agentId: string; runId: string; approved: boolean; note: string | undefined; actor: string },
): Promise<RoutineResult<DecisionAnswer>> {
  const { agentId, runId } = d;
  const run = await getRoutineRun(pool, agentId, runId);
  if (!run) return refuse('not_found', `routine run ${runId} not found`, 404);
  if (run.status !== 'needs_approval')
    return refuse('not_awaiting_approval', `run ${runId} is ${run.status}, not waiting for approval`, 409);
  const handle = client.workflow.getHandle(run.workflowId, undefined, { firstExecutionRunId: runId });
  const decision = { approved: d.approved, ...(d.note ? { note: d.note } : {}) };
  const answer = await submitDecision(
    client,
    deadlineMs,
    () => handle.executeUpdate(decideApproval, { args: [decision] }),
    { pool, entry: decisionAudit('routine_run', { ...d, subject: runId }) },
  );
  return { ok: true, value: answer };
}

/** An app's saved tools, the latest version of each; 404 when there is no such app. */
export async function listAppTools(pool: Pool, agentId: string, appId: string): Promise<RoutineResult<SavedToolRow[]>> {
  if (!(await getApp(pool, agentId, appId))) return refuse('not_found', `app ${appId} not found`, 404);
  return { ok: true, value: await listTools(pool, agentId, appId) };
}
