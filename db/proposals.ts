import type { Check } from '../domain/admission';
import type { ProposalAnswer, QueuedSummary } from '../domain/reflection';
import type { Queryable } from './pool';

export type ProposalStatus = 'skipped' | 'admitted' | 'rejected' | 'awaiting_approval' | 'poisoned';

export interface ProposalRow {
  id: string;
  agentId: string;
  workflowId: string;
  status: ProposalStatus;
  answer: ProposalAnswer;
  checks: Check[];
  baseVersion: number;
  version: number | null;
  tier: string | null;
  conversationIds: string[];
  decision: { approved: boolean; note?: string } | null;
  createdAt: string;
  decidedAt: string | null;
  /** While awaiting approval: when the wait ends (null: began waiting before it was kept). It began at createdAt. */
  approvalExpiresAt: string | null;
}

interface Row {
  id: string;
  agent_id: string;
  workflow_id: string;
  status: ProposalStatus;
  answer: ProposalAnswer;
  checks: Check[];
  base_version: number;
  version: number | null;
  tier: string | null;
  conversation_ids: string[];
  decision: ProposalRow['decision'];
  created_at: Date;
  decided_at: Date | null;
  approval_expires_at: Date | null;
}

const proposalOf = (r: Row): ProposalRow => ({
  id: r.id,
  agentId: r.agent_id,
  workflowId: r.workflow_id,
  status: r.status,
  answer: r.answer,
  checks: r.checks,
  baseVersion: r.base_version,
  version: r.version,
  tier: r.tier,
  conversationIds: r.conversation_ids,
  decision: r.decision,
  createdAt: r.created_at.toISOString(),
  decidedAt: r.decided_at?.toISOString() ?? null,
  approvalExpiresAt: r.approval_expires_at?.toISOString() ?? null,
});

/**
 * Records a proposal once (a retried activity finds the first record). One awaiting approval waits from now for
 * `approvalWaitMs`: its workflow's timer starts as the activity returns, so the wait ends moments after the recorded
 * instant, never before it.
 */
export async function insertProposal(
  db: Queryable,
  p: Pick<ProposalRow, 'id' | 'agentId' | 'workflowId' | 'status' | 'answer' | 'checks' | 'baseVersion'> &
    Pick<ProposalRow, 'conversationIds'> & { tier: string; approvalWaitMs: number },
): Promise<ProposalRow> {
  await db.query(
    `INSERT INTO proposals (id, agent_id, workflow_id, status, answer, checks, base_version, tier, conversation_ids,
                           decided_at, approval_expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, CASE WHEN $4 = 'awaiting_approval' THEN NULL ELSE now() END,
             CASE WHEN $4 = 'awaiting_approval' THEN now() + $10::bigint * interval '1 millisecond' END)
     ON CONFLICT (id) DO NOTHING`,
    [
      p.id,
      p.agentId,
      p.workflowId,
      p.status,
      JSON.stringify(p.answer),
      JSON.stringify(p.checks),
      p.baseVersion,
      p.tier,
      JSON.stringify(p.conversationIds),
      p.approvalWaitMs,
    ],
  );
  return (await getProposal(db, p.id))!;
}

export async function getProposal(db: Queryable, id: string): Promise<ProposalRow | undefined> {
  const { rows } = await db.query<Row>('SELECT * FROM proposals WHERE id = $1', [id]);
  return rows[0] && proposalOf(rows[0]);
}

export async function proposalsByIds(db: Queryable, ids: readonly string[]): Promise<ProposalRow[]> {
  const { rows } = await db.query<Row>('SELECT * FROM proposals WHERE id = ANY($1)', [ids]);
  return rows.map(proposalOf);
}

export async function listProposals(db: Queryable, agentId: string, limit = 100): Promise<ProposalRow[]> {
  const { rows } = await db.query<Row>(
    'SELECT * FROM proposals WHERE agent_id = $1 ORDER BY created_at DESC, id LIMIT $2',
    [agentId, limit],
  );
  return rows.map(proposalOf);
}

/** Settles a proposal: admitted with its version, or rejected (with the decision or the checks that rejected it). */
export async function settleProposal(
  db: Queryable,
  id: string,
  s: { status: ProposalStatus; version?: number; checks?: Check[]; decision?: ProposalRow['decision'] },
): Promise<void> {
  await db.query(
    `UPDATE proposals SET status = $2, version = coalesce($3, version), checks = coalesce($4, checks),
            decision = coalesce($5, decision), decided_at = coalesce(decided_at, now())
      WHERE id = $1`,
    [
      id,
      s.status,
      s.version ?? null,
      s.checks ? JSON.stringify(s.checks) : null,
      s.decision ? JSON.stringify(s.decision) : null,
    ],
  );
}

export async function poisonSummaries(
  db: Queryable,
  agentId: string,
  summaries: readonly QueuedSummary[],
  proposalId: string,
): Promise<void> {
  for (const s of summaries) {
    await db.query(
      `INSERT INTO reflection_poison (agent_id, conversation_id, summary, failures, proposal_id)
       SELECT $1, $2, $3, $4, $5 WHERE NOT EXISTS (
         SELECT 1 FROM reflection_poison WHERE agent_id = $1 AND proposal_id = $5 AND conversation_id = $2
       )`,
      [agentId, s.conversationId, JSON.stringify(s), s.failures, proposalId],
    );
  }
}

export async function listPoisoned(
  db: Queryable,
  agentId: string,
): Promise<
  { conversationId: string; summary: QueuedSummary; failures: number; proposalId: string | null; at: string }[]
> {
  const { rows } = await db.query<{
    conversation_id: string;
    summary: QueuedSummary;
    failures: number;
    proposal_id: string | null;
    created_at: Date;
  }>('SELECT * FROM reflection_poison WHERE agent_id = $1 ORDER BY created_at', [agentId]);
  return rows.map((r) => ({
    conversationId: r.conversation_id,
    summary: r.summary,
    failures: r.failures,
    proposalId: r.proposal_id,
    at: r.created_at.toISOString(),
  }));
}

export async function logGateDecision(
  db: Queryable,
  d: { agentId: string; conversationId: string; turnId: string; evolve: boolean; reason: string },
): Promise<void> {
  await db.query(
    `INSERT INTO reflection_gate_log (agent_id, conversation_id, turn_id, evolve, reason) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT DO NOTHING`,
    [d.agentId, d.conversationId, d.turnId, d.evolve, d.reason],
  );
}

export async function gateLog(
  db: Queryable,
  agentId: string,
  limit = 100,
): Promise<{ conversationId: string; turnId: string; evolve: boolean; reason: string; at: string }[]> {
  const { rows } = await db.query<{
    conversation_id: string;
    turn_id: string;
    evolve: boolean;
    reason: string;
    created_at: Date;
  }>('SELECT * FROM reflection_gate_log WHERE agent_id = $1 ORDER BY created_at DESC LIMIT $2', [agentId, limit]);
  return rows.map((r) => ({
    conversationId: r.conversation_id,
    turnId: r.turn_id,
    evolve: r.evolve,
    reason: r.reason,
    at: r.created_at.toISOString(),
  }));
}

export async function recordCost(
  db: Queryable,
  c: { callKey: string; agentId: string; purpose: string; model: string; usage: unknown; costUsd: number },
): Promise<void> {
  await db.query(
    `INSERT INTO reflection_costs (call_key, agent_id, purpose, model, usage, cost_usd) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (call_key) DO NOTHING`,
    [c.callKey, c.agentId, c.purpose, c.model, JSON.stringify(c.usage), c.costUsd],
  );
}

/** Reflection spending of the agent since UTC midnight. */
export async function spentToday(db: Queryable, agentId: string): Promise<number> {
  const { rows } = await db.query<{ spent: string | null }>(
    `SELECT sum(cost_usd) AS spent FROM reflection_costs
      WHERE agent_id = $1 AND created_at >= date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'`,
    [agentId],
  );
  return Number(rows[0]?.spent ?? 0);
}

/** A finished turn as reflection takes it up: whose it is, whether its agent reflects, and what the turn wrote. */
export interface TurnToReflect {
  agentId: string;
  conversationId: string;
  reflectionEnabled: boolean;
  /** The turn's first and last transcript seqs; null when it wrote nothing. */
  fromSeq: number | null;
  toSeq: number | null;
  /** The turn's assistant messages that begin `Error:`. */
  errorReplies: number;
}

export async function turnToReflect(
  db: Queryable,
  conversationKey: string,
  turnId: string,
): Promise<TurnToReflect | undefined> {
  const { rows } = await db.query<TurnToReflectRow>(`SELECT ${turnToReflectSql('$1', '$2')}`, [
    conversationKey,
    turnId,
  ]);
  return rows[0] && toTurnToReflect(rows[0]);
}

/**
 * turnToReflect's select list and FROM, for the statement that ends a turn too (db/conversations.ts finishTurn): the
 * conversation's key and the turn's id as the placeholders given, and seqs this statement appends as `appendedSeq`
 * (a statement reads none of its own rows).
 */
export function turnToReflectSql(key: string, turn: string, appendedSeq = 'NULL::integer'): string {
  const ofTurn = `FROM messages WHERE conversation_key = c.key AND turn_id = ${turn}`;
  return `c.agent_id, c.conversation_id, a.reflection_enabled,
       (SELECT min(seq) ${ofTurn}) AS from_seq,
       GREATEST((SELECT max(seq) ${ofTurn}), ${appendedSeq}) AS to_seq,
       (SELECT count(*) ${ofTurn} AND role = 'assistant' AND text LIKE 'Error:%') AS errors
     FROM conversations c JOIN agents a ON a.id = c.agent_id WHERE c.key = ${key}`;
}

export interface TurnToReflectRow {
  agent_id: string;
  conversation_id: string;
  reflection_enabled: boolean;
  from_seq: number | null;
  to_seq: number | null;
  errors: string;
}

export const toTurnToReflect = (r: TurnToReflectRow): TurnToReflect => ({
  agentId: r.agent_id,
  conversationId: r.conversation_id,
  reflectionEnabled: r.reflection_enabled,
  fromSeq: r.from_seq,
  toSeq: r.to_seq,
  errorReplies: Number(r.errors),
});
