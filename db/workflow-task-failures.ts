import type { WorkflowTaskFailureCause } from '../domain/failures';
import type { Pool } from './pool';

export interface WorkflowTaskFailure {
  runId: string;
  workflowId: string;
  workflowType: string;
  agentId: string | null;
  cause: WorkflowTaskFailureCause;
  failures: number;
  lastMessage: string;
  lastAt: string;
}

/** One more failed task of a run; the cause and message are the latest one's. */
export async function recordWorkflowTaskFailure(
  pool: Pool,
  f: Omit<WorkflowTaskFailure, 'failures' | 'lastAt'>,
): Promise<void> {
  await pool.query(
    `INSERT INTO workflow_task_failures (run_id, workflow_id, workflow_type, agent_id, cause, failures, last_message)
     VALUES ($1, $2, $3, $4, $5, 1, $6)
     ON CONFLICT (run_id) DO UPDATE SET failures = workflow_task_failures.failures + 1, cause = EXCLUDED.cause,
       last_message = EXCLUDED.last_message, last_at = now()`,
    [f.runId, f.workflowId, f.workflowType, f.agentId, f.cause, f.lastMessage.slice(0, 2000)],
  );
}

/** An agent's runs whose task failed, as the workers recorded them, the latest failing first. */
export async function failingRunsOf(pool: Pool, agentId: string): Promise<WorkflowTaskFailure[]> {
  const { rows } = await pool.query<WorkflowTaskFailure>(
    `SELECT run_id AS "runId", workflow_id AS "workflowId", workflow_type AS "workflowType", agent_id AS "agentId",
       cause, failures, last_message AS "lastMessage", to_char(last_at AT TIME ZONE 'UTC',
       'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "lastAt"
     FROM workflow_task_failures WHERE agent_id = $1 ORDER BY last_at DESC LIMIT 50`,
    [agentId],
  );
  return rows;
}
