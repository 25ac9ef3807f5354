import type { Candidate } from '../domain/evals';
import { transcriptOrigin } from '../domain/ids';
import { ensureConversation, entriesJson } from './conversations';
import type { KeptTurn } from './eval-recordings';
import type { Queryable } from './pool';

/** A conversation forked from another at a turn, run under a candidate. */
export interface ForkRow {
  conversationKey: string;
  sourceKey: string;
  atTurn: number;
  candidate: Candidate;
  /** Tools (model-facing names) whose calls a person let have real effects; the others are dry runs. */
  enabledTools: string[];
}

const FORK_COLUMNS = `conversation_key AS "conversationKey", source_key AS "sourceKey", at_turn AS "atTurn",
  candidate, enabled_tools AS "enabledTools"`;

export async function forkOf(db: Queryable, conversationKey: string): Promise<ForkRow | undefined> {
  const { rows } = await db.query<ForkRow>(
    `SELECT ${FORK_COLUMNS} FROM conversation_forks WHERE conversation_key = $1`,
    [conversationKey],
  );
  return rows[0];
}

/**
 * The fork's conversation made with a copy of the turns' rows, in their order, each under its source seq and origin
 * (an evaluation finds a copied turn's model answers by it) and still its turn's (a fork of a fork counts them too),
 * and its record; in the caller's transaction.
 */
export async function createFork(
  db: Queryable,
  f: { agentId: string; conversationId: string; key: string; sourceKey: string; atTurn: number; candidate: Candidate },
  turns: readonly KeptTurn[],
): Promise<ForkRow> {
  await ensureConversation(db, { key: f.key, agentId: f.agentId, conversationId: f.conversationId });
  for (const turn of turns) {
    const entries = turn.rows.map((r) => ({ ...r, origin: transcriptOrigin.forked(r.seq, r.origin) }));
    await db.query('SELECT 1 FROM keel_append_transcript($1, $2, $3::jsonb)', [
      f.key,
      turn.turnId,
      entriesJson(entries),
    ]);
  }
  const { rows } = await db.query<ForkRow>(
    `INSERT INTO conversation_forks (conversation_key, source_key, at_turn, candidate)
     VALUES ($1, $2, $3, $4) RETURNING ${FORK_COLUMNS}`,
    [f.key, f.sourceKey, f.atTurn, JSON.stringify(f.candidate)],
  );
  return rows[0]!;
}

export async function setForkTools(
  db: Queryable,
  conversationKey: string,
  tools: string[],
): Promise<ForkRow | undefined> {
  const { rows } = await db.query<ForkRow>(
    `UPDATE conversation_forks SET enabled_tools = $2 WHERE conversation_key = $1 RETURNING ${FORK_COLUMNS}`,
    [conversationKey, JSON.stringify(tools)],
  );
  return rows[0];
}
