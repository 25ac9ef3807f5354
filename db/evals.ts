import type {
  Candidate,
  CaseResult,
  EvalCase,
  EvalConfigs,
  EvalMode,
  EvalSummary,
  EvalTurnResult,
} from '../domain/evals';
import type { ContentBlock } from '../domain/model';
import type { Queryable } from './pool';

/** An evaluation as it is kept: what it runs against, and how it went. */
export interface EvalRow {
  id: string;
  agentId: string;
  mode: EvalMode;
  candidate: Candidate;
  configs: EvalConfigs;
  suite: string | null;
  status: 'running' | 'finished' | 'failed';
  summary: EvalSummary | { error: string } | null;
  actor: string;
  createdAt: string;
  finishedAt: string | null;
}

export interface EvalCaseRow {
  caseId: string;
  source: EvalCase['source'];
  status: 'pending' | 'passed' | 'failed';
  result: CaseResult | null;
}

const EVAL_COLUMNS = `id, agent_id AS "agentId", mode, candidate, configs, suite, status, summary, actor,
  to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "createdAt",
  to_char(finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS "finishedAt"`;

export async function insertEval(
  db: Queryable,
  e: Pick<EvalRow, 'id' | 'agentId' | 'mode' | 'candidate' | 'configs' | 'suite' | 'actor'>,
): Promise<EvalRow> {
  const { rows } = await db.query<EvalRow>(
    `INSERT INTO evals (id, agent_id, mode, candidate, configs, suite, status, actor)
     VALUES ($1, $2, $3, $4, $5, $6, 'running', $7) RETURNING ${EVAL_COLUMNS}`,
    [e.id, e.agentId, e.mode, JSON.stringify(e.candidate), JSON.stringify(e.configs), e.suite, e.actor],
  );
  return rows[0]!;
}

/** The cases, as they were taken when the evaluation was asked for; a retried insert adds none twice. */
export async function insertEvalCases(db: Queryable, evalId: string, cases: readonly EvalCase[]): Promise<void> {
  await db.query(
    `INSERT INTO eval_cases (eval_id, case_id, position, source, spec, status)
     SELECT $1, c->>'id', ord::int, c->>'source', c, 'pending' FROM jsonb_array_elements($2::jsonb) WITH ORDINALITY
       AS x(c, ord)
     ON CONFLICT DO NOTHING`,
    [evalId, JSON.stringify(cases)],
  );
}

export async function getEval(db: Queryable, agentId: string, evalId: string): Promise<EvalRow | undefined> {
  const { rows } = await db.query<EvalRow>(`SELECT ${EVAL_COLUMNS} FROM evals WHERE agent_id = $1 AND id = $2`, [
    agentId,
    evalId,
  ]);
  return rows[0];
}

/** The agent's latest evaluations, newest first. */
export async function listEvals(db: Queryable, agentId: string, limit: number): Promise<EvalRow[]> {
  const { rows } = await db.query<EvalRow>(
    `SELECT ${EVAL_COLUMNS} FROM evals WHERE agent_id = $1 ORDER BY created_at DESC, id LIMIT $2`,
    [agentId, limit],
  );
  return rows;
}

export async function evalCases(db: Queryable, evalId: string): Promise<EvalCaseRow[]> {
  const { rows } = await db.query<EvalCaseRow>(
    `SELECT case_id AS "caseId", source, status, result FROM eval_cases WHERE eval_id = $1 ORDER BY position`,
    [evalId],
  );
  return rows;
}

export async function evalCaseIds(db: Queryable, evalId: string): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    'SELECT case_id AS id FROM eval_cases WHERE eval_id = $1 ORDER BY position',
    [evalId],
  );
  return rows.map((r) => r.id);
}

/** A case with the evaluation it belongs to. */
export async function evalCase(
  db: Queryable,
  evalId: string,
  caseId: string,
): Promise<{ evaluation: EvalRow; spec: EvalCase; status: EvalCaseRow['status']; result: CaseResult | null }> {
  const { rows } = await db.query<
    { evaluation: EvalRow; spec: EvalCase; status: EvalCaseRow['status'] } & {
      result: CaseResult | null;
    }
  >(
    `SELECT (SELECT to_jsonb(e) FROM (SELECT ${EVAL_COLUMNS} FROM evals WHERE id = $1) e) AS evaluation,
            spec, status, result
       FROM eval_cases WHERE eval_id = $1 AND case_id = $2`,
    [evalId, caseId],
  );
  const row = rows[0];
  if (!row) throw new Error(`case ${caseId} of evaluation ${evalId} is not recorded`);
  return row;
}

/** The case's turns the candidate has run, in order. */
export async function evalTurns(db: Queryable, evalId: string, caseId: string): Promise<EvalTurnResult[]> {
  const { rows } = await db.query<{ result: EvalTurnResult }>(
    'SELECT result FROM eval_turns WHERE eval_id = $1 AND case_id = $2 ORDER BY turn_index',
    [evalId, caseId],
  );
  return rows.map((r) => r.result);
}

/** A turn's result, once: a retried step that finds its turn written keeps the first. */
export async function putEvalTurn(db: Queryable, evalId: string, caseId: string, t: EvalTurnResult): Promise<void> {
  await db.query(
    `INSERT INTO eval_turns (eval_id, case_id, turn_index, result) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
    [evalId, caseId, t.turn, JSON.stringify(t)],
  );
}

export async function setCaseResult(db: Queryable, evalId: string, caseId: string, r: CaseResult): Promise<void> {
  await db.query('UPDATE eval_cases SET status = $3, result = $4 WHERE eval_id = $1 AND case_id = $2', [
    evalId,
    caseId,
    r.passed ? 'passed' : 'failed',
    JSON.stringify(r),
  ]);
}

/** The evaluation's counts from its scored cases, kept as it finishes. */
export async function finishEval(db: Queryable, evalId: string): Promise<EvalSummary> {
  const { rows } = await db.query<{ summary: EvalSummary }>(
    `UPDATE evals SET status = 'finished', finished_at = coalesce(finished_at, now()), summary = (
       SELECT jsonb_build_object(
         'cases', count(*),
         'passed', count(*) FILTER (WHERE status = 'passed'),
         'failed', count(*) FILTER (WHERE status <> 'passed'),
         'costUsd', coalesce(sum((result->>'costUsd')::numeric), 0),
         'modelCalls', coalesce(sum((result->>'modelCalls')::int), 0))
       FROM eval_cases WHERE eval_id = $1)
     WHERE id = $1 RETURNING summary`,
    [evalId],
  );
  return rows[0]!.summary;
}

/** An evaluation that could not run a case: why, in its summary. */
export async function failEval(db: Queryable, evalId: string, reason: string): Promise<void> {
  await db.query(
    `UPDATE evals SET status = 'failed', finished_at = now(), summary = jsonb_build_object('error', $2::text)
      WHERE id = $1`,
    [evalId, reason],
  );
}

/** An evaluation's answer to a model call (a live model's, a judge's), if an earlier attempt paid for one. */
export async function evalAnswer(db: Queryable, callKey: string): Promise<ContentBlock[] | undefined> {
  const { rows } = await db.query<{ content: ContentBlock[] }>(
    'SELECT content FROM eval_model_answers WHERE call_key = $1',
    [callKey],
  );
  return rows[0]?.content;
}

/** Keeps an answer once, and answers the one kept: another attempt's, when it kept one first. */
export async function keepEvalAnswer(
  db: Queryable,
  a: { callKey: string; evalId: string; caseId: string; content: ContentBlock[] },
): Promise<ContentBlock[]> {
  const { rows } = await db.query<{ content: ContentBlock[] }>(
    `WITH kept AS (
       INSERT INTO eval_model_answers (call_key, eval_id, case_id, content) VALUES ($1, $2, $3, $4)
       ON CONFLICT DO NOTHING RETURNING content)
     SELECT content FROM kept UNION ALL SELECT content FROM eval_model_answers WHERE call_key = $1`,
    [a.callKey, a.evalId, a.caseId, JSON.stringify(a.content)],
  );
  return rows[0]!.content;
}
