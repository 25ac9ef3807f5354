/**
 * An agent's task board as a person reads and moves it, and the skills a task may require. A delegate's claim of a
 * task is services/delegation.ts.
 */
import { recordAudit } from '../db/audit';
import type { Pool } from '../db/pool';
import { getTask, moveTask, taskAttempts, type AttemptRow, type MoveResult, type TaskRow } from '../db/tasks';
import type { TaskStatus } from '../domain/delegation';

// Reads the API serves as they are, and writes db/tasks.ts makes whole in one transaction each (a new task's number
// under the agent's lock; a skill replacing the one of the same name in other casing).
export { createTask, listTasks, putSkill, type TaskRow } from '../db/tasks';

/** A task with its attempts, in attempt order; undefined when the agent has no such task. */
export async function taskWithAttempts(
  pool: Pool,
  agentId: string,
  number: number,
): Promise<(TaskRow & { attempts: AttemptRow[] }) | undefined> {
  const task = await getTask(pool, agentId, number);
  if (!task) return undefined;
  return { ...task, attempts: await taskAttempts(pool, agentId, number) };
}

/**
 * A person moves a task on the board (approve: pending_approval → ready), within the moves the domain allows. An
 * approval is a person's decision: it goes in the audit trail, in the move's own transaction.
 */
export function moveTaskOnBoard(
  pool: Pool,
  agentId: string,
  number: number,
  to: TaskStatus,
  actor: string,
): Promise<MoveResult> {
  return moveTask(pool, agentId, number, to, async (db, from) => {
    if (from !== 'pending_approval' || to !== 'ready') return;
    await recordAudit(db, { agentId, action: 'task.approve', actor, subject: `#${number}` });
  });
}
