import { randomUUID } from 'node:crypto';
import { ScheduleNotFoundError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { recordAudit } from '../db/audit';
import {
  delegateWorkflowsOf,
  eraseAgentRows,
  eraseTranscripts,
  forksOf,
  existsToDelete,
  schedulesOfAgent,
  transcriptsOfAgent,
  transcriptsOfConversation,
} from '../db/erasure';
import type { Pool } from '../db/pool';
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
 */

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

/** Starts a deletion, recorded as asked for; the workflow does the rest. Undefined when there is nothing to delete. */
export async function requestDeletion(
  pool: Pool,
  client: Client,
  taskQueue: string,
  request: DeletionRequest,
): Promise<DeletionView | undefined> {
  if (!(await existsToDelete(pool, request.agentId, request.conversationId))) return undefined;
  const deletionId = randomUUID();
  const input: DeletionInput = { deletionId, ...request };
  await recordAudit(pool, {
    agentId: request.agentId,
    actor: request.actor,
    ...auditOf(input),
    detail: { deletionId, phase: 'requested' },
  });
  await client.workflow.start<DeletionWorkflow>(DELETION_WORKFLOW, {
    taskQueue,
    workflowId: deletionWorkflowId(request.agentId, deletionId),
    // What the deletion covers, for whoever polls it (never content: ids only).
    memo: { conversationId: request.conversationId ?? null },
    args: [input],
  });
  return { deletionId, agentId: request.agentId, conversationId: request.conversationId ?? null, ...RUNNING };
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
 * Ends what runs for what is deleted, so that nothing writes it again: the agent's Schedules first (no new run
 * starts), then every open workflow of the conversation (its delegates') or of the agent, terminated with the
 * deletion named as the reason. Answers how many of each it ended.
 */
export async function endRunningWork(
  pool: Pool,
  client: Client,
  input: DeletionInput,
): Promise<{ workflowsEnded: number; schedulesDeleted: number }> {
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

/** Erases what the deletion covers: the conversation's transcripts, or every transcript and row of the agent's. */
export async function eraseDeleted(pool: Pool, input: DeletionInput): Promise<{ conversations: number }> {
  if (input.conversationId) {
    const key = conversationWorkflowId(input.agentId, input.conversationId);
    // Read before they are erased: the conversation and its forks.
    const [keys, forks] = await Promise.all([
      transcriptsOfConversation(pool, input.agentId, input.conversationId),
      forksOf(pool, key),
    ]);
    await eraseTranscripts(pool, keys);
    return { conversations: 1 + forks.length };
  }
  const keys = await transcriptsOfAgent(pool, input.agentId);
  await eraseTranscripts(pool, keys);
  await eraseAgentRows(pool, input.agentId);
  return { conversations: keys.length };
}

/** The deletion's end, in the audit trail: counts only. */
export async function recordDeletionFinished(pool: Pool, input: DeletionInput, outcome: DeletionOutcome) {
  await recordAudit(pool, {
    agentId: input.agentId,
    actor: input.actor,
    ...auditOf(input),
    detail: { deletionId: input.deletionId, phase: 'finished', ...outcome },
  });
}
