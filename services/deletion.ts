import { randomUUID } from 'node:crypto';
import {
  ScheduleNotFoundError,
  WorkflowExecutionAlreadyStartedError,
  WorkflowNotFoundError,
  type Client,
} from '@temporalio/client';
import pg from 'pg';
import { recordAudit } from '../db/audit';
import {
  delegateWorkflowsOf,
  eraseAgentRows,
  eraseTranscripts,
  forksOf,
  existsToDelete,
  markDeletion,
  lineageOf,
  runningDeletion,
  schedulesOfAgent,
  transcriptsOfAgent,
  transcriptsOfConversation,
  tryShareWriteLock,
  unmarkDeletion,
  unshareWriteLock,
  waitOutWrites,
  writeLockName,
  type RunningDeletion,
} from '../db/erasure';
import { inTransaction, type Pool } from '../db/pool';
import {
  DELETION_WORKFLOW,
  type DeletionInput,
  type DeletionOutcome,
  type DeletionWorkflow,
} from '../contracts/deletion';
import { conversationWorkflowId, deletionWorkflowId, jobScheduleId, routineScheduleId } from '../domain/ids';
import { SA } from '../domain/search-attributes';

/**
 * A person's deletion of a conversation or of an agent, as a workflow (workflows/deletion.ts): a crash halfway goes
 * on where it stopped. What was deleted, when and by whom enters the audit trail, never the content.
 *
 * Nothing races it (docs/design.md, "Deleting"): the deletion is marked in PostgreSQL before it starts, and from then
 * on the API refuses every write to what it deletes (api/deletion-guard.ts). A write that began before the mark holds
 * a lock, shared, until it is done; the deletion's first step takes that lock, exclusive, so it erases only once each
 * such write has landed what it writes.
 */

export type { RunningDeletion };

export interface DeletionRequest {
  agentId: string;
  conversationId?: string;
  actor: string;
}

/** What the API answers for a deletion: its id, and where to ask how it goes. */
export interface DeletionView {
  deletionId: string;
  agentId: string;
  conversationId: string | null;
  status: 'running' | 'finished' | 'failed';
  outcome: DeletionOutcome | null;
}

const auditOf = (input: Pick<DeletionInput, 'conversationId' | 'agentId'>) =>
  input.conversationId
    ? ({ action: 'conversation.delete', subject: input.conversationId } as const)
    : ({ action: 'agent.delete', subject: input.agentId } as const);

/**
 * Starts a deletion, marked and recorded as asked for; the workflow does the rest. Undefined when there is nothing to
 * delete. Asked again while one runs (the agent's covers its conversations), it answers that one, started again if its
 * workflow is not running (its start failed, or an operator ended it).
 */
export async function requestDeletion(
  pool: Pool,
  client: Client,
  taskQueue: string,
  request: DeletionRequest,
): Promise<DeletionView | undefined> {
  const running = await runningDeletion(
    pool,
    request.agentId,
    request.conversationId === undefined ? [] : [request.conversationId],
  );
  if (running) return startDeletion(client, taskQueue, running);
  if (!(await existsToDelete(pool, request.agentId, request.conversationId))) return undefined;
  const asked = { deletionId: randomUUID(), ...request };
  // From this commit on, every write to what it deletes is refused: before the workflow ends or erases anything.
  const marked = await inTransaction(pool, async (db) => {
    const deletion = await markDeletion(db, asked);
    if (deletion.deletionId === asked.deletionId)
      await recordAudit(db, {
        agentId: request.agentId,
        actor: request.actor,
        ...auditOf(asked),
        detail: { deletionId: asked.deletionId, phase: 'requested' },
      });
    return deletion;
  });
  try {
    return await startDeletion(client, taskQueue, marked);
  } catch (err) {
    // Not started: what it would delete takes writes again. (Had it started after all, its first step marks it again
    // before it waits out the writes, so nothing it erases can be written behind it.)
    if (marked.deletionId === asked.deletionId) await unmarkDeletion(pool, asked.deletionId).catch(() => undefined);
    throw err;
  }
}

/** Starts the marked deletion's workflow, unless it runs already. */
async function startDeletion(client: Client, taskQueue: string, d: RunningDeletion): Promise<DeletionView> {
  const input: DeletionInput = {
    deletionId: d.deletionId,
    agentId: d.agentId,
    ...(d.conversationId === null ? {} : { conversationId: d.conversationId }),
    actor: d.actor,
  };
  try {
    await client.workflow.start<DeletionWorkflow>(DELETION_WORKFLOW, {
      taskQueue,
      workflowId: deletionWorkflowId(d.agentId, d.deletionId),
      // What the deletion covers, for whoever polls it (never content: ids only).
      memo: { conversationId: d.conversationId },
      args: [input],
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
  return { deletionId: d.deletionId, agentId: d.agentId, conversationId: d.conversationId, ...RUNNING };
}

const RUNNING = { status: 'running', outcome: null } as const;

/** How a deletion goes; undefined when there is no such deletion of the agent's. */
export async function deletionStatus(
  client: Client,
  agentId: string,
  deletionId: string,
): Promise<DeletionView | undefined> {
  const handle = client.workflow.getHandle<DeletionWorkflow>(deletionWorkflowId(agentId, deletionId));
  let described: Awaited<ReturnType<typeof handle.describe>>;
  try {
    described = await handle.describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  }
  const conversationId = typeof described.memo?.conversationId === 'string' ? described.memo.conversationId : null;
  const base = { deletionId, agentId, conversationId };
  switch (described.status.name) {
    case 'RUNNING':
      return { ...base, ...RUNNING };
    case 'COMPLETED':
      return { ...base, status: 'finished', outcome: await handle.result() };
    default:
      return { ...base, status: 'failed', outcome: null };
  }
}

/**
 * Ends what runs for what is deleted, so that nothing writes it again. First the API's writes: the deletion is marked
 * (again: a no-op unless its request's mark was lost), so no write begins, and each write that began before the mark
 * is waited out. Then the agent's Schedules (no new run starts), then every open workflow of the conversation (its
 * delegates') or of the agent, terminated with the deletion named as the reason. Answers how many of each it ended.
 */
export async function endRunningWork(
  pool: Pool,
  client: Client,
  input: DeletionInput,
): Promise<{ workflowsEnded: number; schedulesDeleted: number }> {
  await markDeletion(pool, input);
  await waitOutWrites(pool, writeLockName(input.agentId, input.conversationId));
  const reason = `deleted by ${input.actor} (deletion ${input.deletionId})`;
  let schedulesDeleted = 0;
  const ids = new Set<string>();
  if (input.conversationId) {
    // Each transcript's key is its workflow's id: the conversation's, its forks', their delegates'.
    for (const id of await transcriptsOfConversation(pool, input.agentId, input.conversationId)) ids.add(id);
  } else {
    for (const s of await schedulesOfAgent(pool, input.agentId)) {
      const scheduleId = s.id ? jobScheduleId(s.id) : routineScheduleId(input.agentId, s.app_id!, s.slug!);
      if (await deleteSchedule(client, scheduleId)) schedulesDeleted++;
    }
    for (const id of await delegateWorkflowsOf(pool, input.agentId)) ids.add(id);
    const query = `${SA.agentId.name} = '${input.agentId.replace(/'/g, "\\'")}' AND ExecutionStatus = 'Running'`;
    for await (const w of client.workflow.list({ query })) ids.add(w.workflowId);
  }
  ids.delete(deletionWorkflowId(input.agentId, input.deletionId));
  let workflowsEnded = 0;
  for (const id of ids) if (await terminate(client, id, reason)) workflowsEnded++;
  return { workflowsEnded, schedulesDeleted };
}

async function deleteSchedule(client: Client, scheduleId: string): Promise<boolean> {
  try {
    await client.schedule.getHandle(scheduleId).delete();
    return true;
  } catch (err) {
    if (err instanceof ScheduleNotFoundError) return false;
    throw err;
  }
}

async function terminate(client: Client, workflowId: string, reason: string): Promise<boolean> {
  try {
    await client.workflow.getHandle(workflowId).terminate(reason);
    return true;
  } catch (err) {
    // Already closed, or never started: nothing runs.
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}

/**
 * Erases what the deletion covers: the conversation's transcripts, or every transcript and row of the agent's.
 * Answers how many conversations (forks, delegates', jobs' and routines' included) and rows it erased.
 */
export async function eraseDeleted(
  pool: Pool,
  input: DeletionInput,
): Promise<{ conversations: number; rowsErased: number }> {
  if (input.conversationId) {
    const key = conversationWorkflowId(input.agentId, input.conversationId);
    // Read before they are erased: the conversation and its forks.
    const [keys, forks] = await Promise.all([
      transcriptsOfConversation(pool, input.agentId, input.conversationId),
      forksOf(pool, key),
    ]);
    return { conversations: 1 + forks.length, rowsErased: await eraseTranscripts(pool, keys) };
  }
  const keys = await transcriptsOfAgent(pool, input.agentId);
  const rowsErased = (await eraseTranscripts(pool, keys)) + (await eraseAgentRows(pool, input.agentId));
  return { conversations: keys.length, rowsErased };
}

/** The deletion's end, in the audit trail (counts only), and what it deleted takes writes again. */
export async function recordDeletionFinished(pool: Pool, input: DeletionInput, outcome: DeletionOutcome) {
  await inTransaction(pool, async (db) => {
    await recordAudit(db, {
      agentId: input.agentId,
      actor: input.actor,
      ...auditOf(input),
      detail: { deletionId: input.deletionId, phase: 'finished', ...outcome },
    });
    await unmarkDeletion(db, input.deletionId);
  });
}

/** What a request under the agent (or under one of its conversations) writes or reads: a fork's sources too. */
const lineage = (pool: Pool, agentId: string, conversationId?: string): Promise<string[]> =>
  conversationId === undefined ? Promise.resolve([]) : lineageOf(pool, agentId, conversationId);

/** The deletion running for the agent, or for the conversation or one it was forked from: what the guard asks. */
export async function runningDeletionOf(
  pool: Pool,
  agentId: string,
  conversationId?: string,
): Promise<RunningDeletion | undefined> {
  return runningDeletion(pool, agentId, await lineage(pool, agentId, conversationId));
}

/** What refuses a write: the deletion running for what it writes (undefined only if the lock is another's). */
export interface WriteRefused {
  deletion: RunningDeletion | undefined;
}

/**
 * Holds a write to an agent (or to one of its conversations, a fork's sources included) against their deletion,
 * before it does anything. A write refused at once never touches the locks: writes retried against a deletion would
 * otherwise keep its lock shared without end. Then its locks, then the query again, for a deletion marked meanwhile.
 * Answers the hold, to give back once the write is done, or what refuses the write.
 */
export async function holdForWrite(
  holds: WriteHolds,
  pool: Pool,
  agentId: string,
  conversationId?: string,
): Promise<WriteHold | WriteRefused> {
  const conversations = await lineage(pool, agentId, conversationId);
  const before = await runningDeletion(pool, agentId, conversations);
  if (before) return { deletion: before };
  const hold = await holds.hold([writeLockName(agentId), ...conversations.map((c) => writeLockName(agentId, c))]);
  let deletion: RunningDeletion | undefined;
  try {
    deletion = await runningDeletion(pool, agentId, conversations);
  } catch (err) {
    await hold?.release();
    throw err;
  }
  if (hold && !deletion) return hold;
  await hold?.release();
  return { deletion };
}

/** A write's holds, given back once when it is done. */
export interface WriteHold {
  release(): Promise<void>;
}

interface SharedHold {
  /** The writes of this process that share it. */
  count: number;
  /** Whether the lock was taken, and on which connection. */
  taken: Promise<{ held: boolean; on: pg.Client }>;
}

/**
 * One API process's shared holds of the locks deletions wait on. One connection of its own holds them all, each lock
 * once however many of the process's writes share it, and it never waits: a lock a deletion holds, or waits for, is
 * not taken (the deletion is marked by then, and the write is refused). A lock is given back when the last write that
 * shares it ends, and with the connection if that is lost (a write then in flight is no longer waited for).
 */
export class WriteHolds {
  private connection: Promise<pg.Client> | undefined;
  private live: pg.Client | undefined;
  private readonly shared = new Map<string, SharedHold>();
  private tail: Promise<unknown> = Promise.resolve();

  constructor(private readonly config: pg.ClientConfig) {}

  /** Holds every lock named; undefined, holding none, when one of them is a deletion's. */
  async hold(names: readonly string[]): Promise<WriteHold | undefined> {
    const joined: [string, SharedHold][] = [];
    const release = async () => {
      await Promise.all(joined.splice(0).map(([name, h]) => this.leave(name, h)));
    };
    try {
      for (const name of names) {
        const h = this.join(name);
        joined.push([name, h]);
        if (!(await h.taken).held) {
          await release();
          return undefined;
        }
      }
    } catch (err) {
      await release();
      throw err;
    }
    return { release };
  }

  /** Ends the connection, and with it every hold. */
  async close(): Promise<void> {
    const connection = this.connection;
    this.drop();
    await (await connection?.catch(() => undefined))?.end().catch(() => undefined);
  }

  private join(name: string): SharedHold {
    let h = this.shared.get(name);
    if (!h) {
      const fresh: SharedHold = { count: 0, taken: this.take(name) };
      this.shared.set(name, fresh);
      // Only a lock held is shared: after a refusal or a failure, the next write asks again.
      fresh.taken.then(
        (t) => {
          if (!t.held) this.forget(name, fresh);
        },
        () => this.forget(name, fresh),
      );
      h = fresh;
    }
    h.count++;
    return h;
  }

  private async leave(name: string, h: SharedHold): Promise<void> {
    if (--h.count > 0) return;
    this.forget(name, h);
    const t = await h.taken.catch(() => undefined);
    if (!t?.held || t.on !== this.live) return;
    // A hold not given back would keep a deletion waiting: a connection that cannot give it back is ended.
    await this.serially(() => unshareWriteLock(t.on, name)).catch(() => this.close());
  }

  private forget(name: string, h: SharedHold): void {
    if (this.shared.get(name) === h) this.shared.delete(name);
  }

  private async take(name: string): Promise<{ held: boolean; on: pg.Client }> {
    const on = await this.connect();
    return { held: await this.serially(() => tryShareWriteLock(on, name)), on };
  }

  /** One statement at a time on the connection, in the order asked (pg's own queue is deprecated). */
  private serially<T>(statement: () => Promise<T>): Promise<T> {
    const run = this.tail.then(statement, statement);
    this.tail = run.catch(() => undefined);
    return run;
  }

  private connect(): Promise<pg.Client> {
    this.connection ??= (async () => {
      // A connection gone silent ends in an error, not in a statement that never answers and stalls every write.
      const client = new pg.Client({ ...this.config, keepAlive: true, query_timeout: 30_000 });
      const lost = () => {
        if (this.live === client) this.drop();
      };
      client.on('error', lost);
      client.on('end', lost);
      await client.connect();
      this.live = client;
      return client;
    })().catch((err: unknown) => {
      this.connection = undefined;
      throw err;
    });
    return this.connection;
  }

  /** Forgets the connection and every hold it had: the next write connects again. */
  private drop(): void {
    this.connection = undefined;
    this.live = undefined;
    this.shared.clear();
    // A statement stuck on the lost connection must not hold up the next connection's.
    this.tail = Promise.resolve();
  }
}
