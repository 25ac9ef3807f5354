import { randomBytes } from 'node:crypto';
import type { Delivery } from '../domain/delivery';
import type { AuthoredTool, Gate, RoutineDefinition, RoutineRunStatus, RoutineStatus } from '../domain/routines';
import type { PageRequest } from './page';
import type { Queryable } from './pool';

export interface RoutineRow {
  agentId: string;
  appId: string;
  slug: string;
  label: string;
  schedule: RoutineDefinition['schedule'];
  cron: string;
  prompt: string | null;
  playbook: string | null;
  delivery: Delivery | null;
  /** The routine's own budget for each run (USD); null: the agent's perRoutineRunUsd applies. */
  budgetUsd: number | null;
  status: RoutineStatus;
  createdAt: string;
  updatedAt: string;
}

interface RoutineDbRow {
  agent_id: string;
  app_id: string;
  slug: string;
  label: string;
  schedule: RoutineDefinition['schedule'];
  cron: string;
  prompt: string | null;
  playbook: string | null;
  delivery: Delivery | null;
  budget_usd: string | null;
  status: RoutineStatus;
  created_at: Date;
  updated_at: Date;
}

const routineOf = (r: RoutineDbRow): RoutineRow => ({
  agentId: r.agent_id,
  appId: r.app_id,
  slug: r.slug,
  label: r.label,
  schedule: r.schedule,
  cron: r.cron,
  prompt: r.prompt,
  playbook: r.playbook,
  delivery: r.delivery,
  budgetUsd: r.budget_usd === null ? null : Number(r.budget_usd),
  status: r.status,
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
});

/** Creates or updates a routine's definition; its status (active or paused) is never changed by an edit. */
export async function putRoutine(
  db: Queryable,
  agentId: string,
  appId: string,
  slug: string,
  def: RoutineDefinition,
  cron: string,
): Promise<{ routine: RoutineRow; created: boolean }> {
  const { rows } = await db.query<RoutineDbRow & { created: boolean }>(
    `INSERT INTO routines (agent_id, app_id, slug, label, schedule, cron, prompt, playbook, delivery, budget_usd)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     ON CONFLICT (agent_id, app_id, slug) DO UPDATE
       SET label = EXCLUDED.label, schedule = EXCLUDED.schedule, cron = EXCLUDED.cron,
           prompt = EXCLUDED.prompt, playbook = EXCLUDED.playbook, delivery = EXCLUDED.delivery,
           budget_usd = EXCLUDED.budget_usd, updated_at = now()
     RETURNING *, (xmax = 0) AS created`,
    [
      agentId,
      appId,
      slug,
      def.label,
      JSON.stringify(def.schedule),
      cron,
      def.prompt ?? null,
      def.playbook ?? null,
      def.delivery ? JSON.stringify(def.delivery) : null,
      def.budgetUsd ?? null,
    ],
  );
  return { routine: routineOf(rows[0]!), created: rows[0]!.created };
}

export async function getRoutine(
  db: Queryable,
  agentId: string,
  appId: string,
  slug: string,
  forUpdate = false,
): Promise<RoutineRow | undefined> {
  const { rows } = await db.query<RoutineDbRow>(
    `SELECT * FROM routines WHERE agent_id = $1 AND app_id = $2 AND slug = $3${forUpdate ? ' FOR UPDATE' : ''}`,
    [agentId, appId, slug],
  );
  return rows[0] && routineOf(rows[0]);
}

/** An app's routines by slug, a page at a time (`after`: the last slug of the page before). */
export async function listRoutines(
  db: Queryable,
  agentId: string,
  appId: string,
  page: PageRequest<string>,
): Promise<RoutineRow[]> {
  const { rows } = await db.query<RoutineDbRow>(
    `SELECT * FROM routines WHERE agent_id = $1 AND app_id = $2 AND ($3::text IS NULL OR slug > $3)
      ORDER BY slug LIMIT $4`,
    [agentId, appId, page.after ?? null, page.limit],
  );
  return rows.map(routineOf);
}

/** The labels of these routines, by `agentId/appId/slug` (a routine deleted since is absent). */
export async function routineLabels(
  db: Queryable,
  refs: readonly { agentId: string; appId: string; slug: string }[],
): Promise<Map<string, string>> {
  const { rows } = await db.query<{ agent_id: string; app_id: string; slug: string; label: string }>(
    `SELECT r.agent_id, r.app_id, r.slug, r.label FROM routines r
       JOIN unnest($1::text[], $2::text[], $3::text[]) AS k (agent_id, app_id, slug)
         ON (r.agent_id, r.app_id, r.slug) = (k.agent_id, k.app_id, k.slug)`,
    [refs.map((r) => r.agentId), refs.map((r) => r.appId), refs.map((r) => r.slug)],
  );
  return new Map(rows.map((r) => [routineRef({ agentId: r.agent_id, appId: r.app_id, slug: r.slug }), r.label]));
}

/** A routine's key in routineLabels' answer. */
export const routineRef = (r: { agentId: string; appId: string; slug: string }) => `${r.agentId}/${r.appId}/${r.slug}`;

export async function setRoutineStatus(
  db: Queryable,
  agentId: string,
  appId: string,
  slug: string,
  from: RoutineStatus,
  to: RoutineStatus,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE routines SET status = $5, updated_at = now()
      WHERE agent_id = $1 AND app_id = $2 AND slug = $3 AND status = $4`,
    [agentId, appId, slug, from, to],
  );
  return rowCount === 1;
}

export async function deleteRoutine(db: Queryable, agentId: string, appId: string, slug: string): Promise<void> {
  await db.query('DELETE FROM routines WHERE agent_id = $1 AND app_id = $2 AND slug = $3', [agentId, appId, slug]);
}

// ---- tools --------------------------------------------------------------------------------------------------------

export interface SavedToolRow extends AuthoredTool {
  version: number;
  authoredBy: string;
  authoredInRun: string | null;
  createdAt: string;
}

interface ToolDbRow {
  name: string;
  version: number;
  title: string;
  purpose: string;
  inputs: string[];
  code: string;
  authored_by: string;
  authored_in_run: string | null;
  created_at: Date;
}

const toolOf = (r: ToolDbRow): SavedToolRow => ({
  name: r.name,
  version: r.version,
  title: r.title,
  purpose: r.purpose,
  inputs: r.inputs,
  code: r.code,
  authoredBy: r.authored_by,
  authoredInRun: r.authored_in_run,
  createdAt: r.created_at.toISOString(),
});

/** The latest version of each tool of an app, oldest tool first (the order tool selection breaks ties by). */
export async function listTools(db: Queryable, agentId: string, appId: string): Promise<SavedToolRow[]> {
  const { rows } = await db.query<ToolDbRow>(
    `SELECT t.* FROM routine_tools t
     JOIN (SELECT name, max(version) AS version, min(created_at) AS first FROM routine_tools
            WHERE agent_id = $1 AND app_id = $2 GROUP BY name) latest
       ON latest.name = t.name AND latest.version = t.version
     WHERE t.agent_id = $1 AND t.app_id = $2 ORDER BY latest.first, t.name`,
    [agentId, appId],
  );
  return rows.map(toolOf);
}

export async function getTool(
  db: Queryable,
  agentId: string,
  appId: string,
  name: string,
  version: number,
): Promise<SavedToolRow | undefined> {
  const { rows } = await db.query<ToolDbRow>(
    'SELECT * FROM routine_tools WHERE agent_id = $1 AND app_id = $2 AND name = $3 AND version = $4',
    [agentId, appId, name, version],
  );
  return rows[0] && toolOf(rows[0]);
}

/**
 * Saves an authored tool as the next version of its name (earlier versions stay). Idempotent per run: a retried
 * save returns the version the run already saved.
 */
export async function saveTool(
  db: Queryable,
  agentId: string,
  appId: string,
  tool: AuthoredTool,
  authoredBy: string,
  runId: string,
): Promise<SavedToolRow> {
  const saved = await db.query<ToolDbRow>('SELECT * FROM routine_tools WHERE authored_in_run = $1', [runId]);
  if (saved.rows[0]) return toolOf(saved.rows[0]);
  // Serialise versions of one app's tools on the app row.
  await db.query('SELECT 1 FROM apps WHERE agent_id = $1 AND app_id = $2 FOR UPDATE', [agentId, appId]);
  const { rows } = await db.query<ToolDbRow>(
    `INSERT INTO routine_tools (agent_id, app_id, name, version, title, purpose, inputs, code, authored_by,
                               authored_in_run)
     SELECT $1, $2, $3, coalesce(max(version), 0) + 1, $4, $5, $6, $7, $8, $9
       FROM routine_tools WHERE agent_id = $1 AND app_id = $2 AND name = $3
     RETURNING *`,
    [agentId, appId, tool.name, tool.title, tool.purpose, JSON.stringify(tool.inputs), tool.code, authoredBy, runId],
  );
  return toolOf(rows[0]!);
}

// ---- runs ---------------------------------------------------------------------------------------------------------

export interface RoutineRunRow {
  runId: string;
  workflowId: string;
  agentId: string;
  appId: string;
  slug: string;
  firedAt: string;
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

// ---- the journal of capability calls ------------------------------------------------------------------------------

export interface JournalEntry {
  seq: number;
  capability: string;
  /** As jsonb hands them back, object keys reordered: a fresh call matches them in canonical form (sameJson). */
  args: unknown[];
  outcome: 'ok' | 'error' | 'gated';
  /** As jsonb hands it back, like `args`. */
  result: unknown;
  error: string | null;
}

/**
 * Where each run's waiting gate would send: the target its gated journal entry was shown with (and that its approved
 * execution sends to). Runs without one (a gate that has no target) are absent.
 */
export async function gatedTargets(db: Queryable, runIds: readonly string[]): Promise<Map<string, Delivery>> {
  const { rows } = await db.query<{ run_id: string; target: Delivery | null }>(
    `SELECT DISTINCT ON (run_id) run_id, result -> 'target' AS target FROM routine_calls
      WHERE run_id = ANY($1) AND outcome = 'gated' ORDER BY run_id, seq DESC`,
    [runIds],
  );
  return new Map(rows.flatMap((r) => (r.target ? [[r.run_id, r.target] as const] : [])));
}

export async function loadJournal(db: Queryable, runId: string): Promise<JournalEntry[]> {
  const { rows } = await db.query<JournalEntry>(
    'SELECT seq, capability, args, outcome, result, error FROM routine_calls WHERE run_id = $1 ORDER BY seq',
    [runId],
  );
  return rows;
}

/**
 * Journals one call and answers whether this write recorded it. A call already journaled under this seq keeps its
 * first outcome; only a `gated` entry takes the outcome of its approved execution.
 */
export async function journalCall(db: Queryable, runId: string, e: JournalEntry): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO routine_calls (run_id, seq, capability, args, outcome, result, error)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (run_id, seq) DO UPDATE
       SET outcome = EXCLUDED.outcome, result = EXCLUDED.result, error = EXCLUDED.error
       WHERE routine_calls.outcome = 'gated' AND EXCLUDED.outcome <> 'gated'`,
    [
      runId,
      e.seq,
      e.capability,
      JSON.stringify(e.args),
      e.outcome,
      e.result === undefined ? null : JSON.stringify(e.result),
      e.error,
    ],
  );
  return rowCount === 1;
}

// ---- artifacts ----------------------------------------------------------------------------------------------------

export interface ArtifactRow {
  artifactId: string;
  runId: string;
  producedBy: string;
  number: number;
  title: string;
  content: string;
  createdAt: string;
}

interface ArtifactDbRow {
  artifact_id: string;
  run_id: string;
  produced_by: string;
  number: number;
  title: string;
  content: string;
  created_at: Date;
}

const artifactOf = (r: ArtifactDbRow): ArtifactRow => ({
  artifactId: r.artifact_id,
  runId: r.run_id,
  producedBy: r.produced_by,
  number: r.number,
  title: r.title,
  content: r.content,
  createdAt: r.created_at.toISOString(),
});

/**
 * Writes a run's artifact once, numbered 1 + the highest number of the same producer. Concurrent runs serialise on
 * the app row, so two runs never get the same number.
 */
export async function writeArtifact(
  db: Queryable,
  a: {
    agentId: string;
    appId: string;
    runId: string;
    producedBy: string;
    content: string;
    title: (n: number) => string;
  },
): Promise<ArtifactRow> {
  const existing = await db.query<ArtifactDbRow>('SELECT * FROM routine_artifacts WHERE run_id = $1', [a.runId]);
  if (existing.rows[0]) return artifactOf(existing.rows[0]);
  await db.query('SELECT 1 FROM apps WHERE agent_id = $1 AND app_id = $2 FOR UPDATE', [a.agentId, a.appId]);
  const { rows: top } = await db.query<{ n: number }>(
    `SELECT coalesce(max(number), 0) + 1 AS n FROM routine_artifacts
      WHERE agent_id = $1 AND app_id = $2 AND produced_by = $3`,
    [a.agentId, a.appId, a.producedBy],
  );
  const n = top[0]!.n;
  const { rows } = await db.query<ArtifactDbRow>(
    `INSERT INTO routine_artifacts (artifact_id, agent_id, app_id, run_id, produced_by, number, title, content)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`,
    [`art_${randomBytes(4).toString('hex')}`, a.agentId, a.appId, a.runId, a.producedBy, n, a.title(n), a.content],
  );
  return artifactOf(rows[0]!);
}

export async function getArtifact(
  db: Queryable,
  agentId: string,
  appId: string,
  artifactId: string,
): Promise<ArtifactRow | undefined> {
  const { rows } = await db.query<ArtifactDbRow>(
    'SELECT * FROM routine_artifacts WHERE agent_id = $1 AND app_id = $2 AND artifact_id = $3',
    [agentId, appId, artifactId],
  );
  return rows[0] && artifactOf(rows[0]);
}
