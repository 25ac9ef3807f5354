/** Routine runs (`routine_runs`): one row per run, from its fire to its end, its gate and decision included. */
import type { Gate, RoutineRunStatus } from '../domain/routines';
import type { Queryable } from './pool';

export interface RoutineRunRow {
  runId: string;
  workflowId: string;
  agentId: string;
  appId: string;
  slug: string;
  firedAt: string;
  startedAt: string;
  status: RoutineRunStatus;
  prompt: string | null;
  toolName: string | null;
  toolVersion: number | null;
  authored: boolean;
  digest: string | null;
  sessionId: string;
  gate: Gate | null;
  decision: { approved: boolean; note?: string; at: string } | null;
  artifactId: string | null;
  finishedAt: string | null;
  /** The approval wait the run's workflow was handed as it began (null: begun before it was recorded). */
  approvalWaitMs: number | null;
  /** While it waits for approval: since when, and when the wait ends (null: began waiting before they were kept). */
  waitingSince: string | null;
  approvalExpiresAt: string | null;
}

interface RunDbRow {
  run_id: string;
  workflow_id: string;
  agent_id: string;
  app_id: string;
  slug: string;
  fired_at: Date;
  started_at: Date;
  status: RoutineRunStatus;
  prompt: string | null;
  tool_name: string | null;
  tool_version: number | null;
  authored: boolean;
  digest: string | null;
  session_id: string;
  gate: Gate | null;
  decision: RoutineRunRow['decision'];
  artifact_id: string | null;
  finished_at: Date | null;
  approval_wait_ms: string | null;
  waiting_since: Date | null;
  approval_expires_at: Date | null;
}

const runOf = (r: RunDbRow): RoutineRunRow => ({
  runId: r.run_id,
  workflowId: r.workflow_id,
  agentId: r.agent_id,
  appId: r.app_id,
  slug: r.slug,
  firedAt: r.fired_at.toISOString(),
  startedAt: r.started_at.toISOString(),
  status: r.status,
  prompt: r.prompt,
  toolName: r.tool_name,
  toolVersion: r.tool_version,
  authored: r.authored,
  digest: r.digest,
  sessionId: r.session_id,
  gate: r.gate,
  decision: r.decision,
  artifactId: r.artifact_id,
  finishedAt: r.finished_at?.toISOString() ?? null,
  approvalWaitMs: r.approval_wait_ms === null ? null : Number(r.approval_wait_ms),
  waitingSince: r.waiting_since?.toISOString() ?? null,
  approvalExpiresAt: r.approval_expires_at?.toISOString() ?? null,
});

export type BeginRun = { kind: 'begun'; run: RoutineRunRow } | { kind: 'busy'; running: RoutineRunRow };

/**
 * Opens a run; refused while another run of the routine is in flight (running or waiting for approval). The run
 * keeps the approval wait it is handed, so that each stop at a gate records when that wait ends.
 */
export async function beginRun(
  db: Queryable,
  r: {
    runId: string;
    workflowId: string;
    agentId: string;
    appId: string;
    slug: string;
    firedAt: Date;
    prompt: string | null;
    sessionId: string;
    approvalWaitMs?: number;
  },
): Promise<BeginRun> {
  const existing = await getRun(db, r.runId);
  if (existing) return { kind: 'begun', run: existing };
  const { rows } = await db.query<RunDbRow>(
    `INSERT INTO routine_runs (run_id, workflow_id, agent_id, app_id, slug, fired_at, status, prompt, session_id,
                               approval_wait_ms)
     VALUES ($1, $2, $3, $4, $5, $6, 'running', $7, $8, $9)
     ON CONFLICT DO NOTHING RETURNING *`,
    [r.runId, r.workflowId, r.agentId, r.appId, r.slug, r.firedAt, r.prompt, r.sessionId, r.approvalWaitMs ?? null],
  );
  if (rows[0]) return { kind: 'begun', run: runOf(rows[0]) };
  const again = await getRun(db, r.runId);
  if (again) return { kind: 'begun', run: again };
  const running = await runInFlight(db, r.agentId, r.appId, r.slug);
  // The run in flight finished between the insert and this read: try once more.
  return running ? { kind: 'busy', running } : beginRun(db, r);
}

export async function runInFlight(
  db: Queryable,
  agentId: string,
  appId: string,
  slug: string,
): Promise<RoutineRunRow | undefined> {
  const { rows } = await db.query<RunDbRow>(
    `SELECT * FROM routine_runs
      WHERE agent_id = $1 AND app_id = $2 AND slug = $3 AND status IN ('running', 'needs_approval')`,
    [agentId, appId, slug],
  );
  return rows[0] && runOf(rows[0]);
}

export async function getRun(db: Queryable, runId: string): Promise<RoutineRunRow | undefined> {
  const { rows } = await db.query<RunDbRow>('SELECT * FROM routine_runs WHERE run_id = $1', [runId]);
  return rows[0] && runOf(rows[0]);
}

export async function runsByIds(db: Queryable, runIds: readonly string[]): Promise<RoutineRunRow[]> {
  const { rows } = await db.query<RunDbRow>('SELECT * FROM routine_runs WHERE run_id = ANY($1)', [runIds]);
  return rows.map(runOf);
}

export async function listRuns(
  db: Queryable,
  agentId: string,
  appId: string,
  slug: string,
  limit = 100,
): Promise<RoutineRunRow[]> {
  const { rows } = await db.query<RunDbRow>(
    `SELECT * FROM routine_runs WHERE agent_id = $1 AND app_id = $2 AND slug = $3
      ORDER BY fired_at DESC, run_id LIMIT $4`,
    [agentId, appId, slug, limit],
  );
  return rows.map(runOf);
}

export async function setRunTool(
  db: Queryable,
  runId: string,
  tool: { name: string; version: number; authored: boolean },
): Promise<void> {
  await db.query('UPDATE routine_runs SET tool_name = $2, tool_version = $3, authored = $4 WHERE run_id = $1', [
    runId,
    tool.name,
    tool.version,
    tool.authored,
  ]);
}

/**
 * The run stops at a gate and waits: since now, until now + its approval wait (`fallbackWaitMs` for a run begun before
 * runs kept theirs). The workflow's timer starts as the activity that calls this returns, so the wait ends moments
 * after the recorded instant, never before it. A retried call keeps the first instants.
 */
export async function markNeedsApproval(
  db: Queryable,
  runId: string,
  gate: Gate,
  digest: string,
  fallbackWaitMs: number,
): Promise<void> {
  await db.query(
    `UPDATE routine_runs SET status = 'needs_approval', gate = $2, digest = $3,
            waiting_since = CASE WHEN status = 'needs_approval' THEN coalesce(waiting_since, now()) ELSE now() END,
            approval_expires_at = CASE WHEN status = 'needs_approval' AND approval_expires_at IS NOT NULL
              THEN approval_expires_at
              ELSE now() + coalesce(approval_wait_ms, $4::bigint) * interval '1 millisecond' END
      WHERE run_id = $1 AND status IN ('running', 'needs_approval')`,
    [runId, JSON.stringify(gate), digest, fallbackWaitMs],
  );
}

export async function recordDecision(
  db: Queryable,
  runId: string,
  decision: { approved: boolean; note?: string },
): Promise<void> {
  await db.query(
    `UPDATE routine_runs SET status = 'running', decision = $2 WHERE run_id = $1 AND status = 'needs_approval'`,
    [runId, JSON.stringify({ ...decision, at: new Date().toISOString() })],
  );
}

export async function finishRun(
  db: Queryable,
  runId: string,
  f: { status: RoutineRunStatus; digest: string; artifactId: string | null },
): Promise<void> {
  await db.query(
    `UPDATE routine_runs SET status = $2, digest = $3, artifact_id = $4, finished_at = now()
      WHERE run_id = $1 AND finished_at IS NULL`,
    [runId, f.status, f.digest, f.artifactId],
  );
}
