import type { ContentBlock } from '../domain/model';
import type { PinnedTool } from '../domain/tool-servers';
import type { TranscriptRole } from '../domain/transcript';
import type { Queryable } from './pool';

/** A turn as Keel kept it: its transcript rows, its end, its pinned tools and what each model call cost. */
export interface KeptTurn {
  turnId: string;
  status: string;
  rows: { seq: number; role: TranscriptRole; content: ContentBlock[]; text: string; origin: string }[];
  tools: PinnedTool[] | null;
  /** Cost in USD by spend key (a model call's transcript origin). */
  costs: Record<string, number>;
  /** The model each call asked, by its index, as its answered attempt recorded it. */
  models: Record<string, string>;
}

/**
 * A conversation's finished turns, in the order its transcript holds them: its own, and those a fork copied from its
 * source (their rows keep their turn; the turn's record, pinned tools and costs are the source's).
 */
export async function keptTurns(db: Queryable, conversationKey: string): Promise<KeptTurn[]> {
  const { rows } = await db.query<KeptTurn>(
    `WITH held AS (
       SELECT turn_id, min(seq) AS first FROM messages
        WHERE conversation_key = $1 AND turn_id IS NOT NULL GROUP BY turn_id)
     SELECT t.turn_id AS "turnId", t.status,
            (SELECT coalesce(jsonb_agg(jsonb_build_object('seq', m.seq, 'role', m.role, 'content', m.content,
                                                          'text', m.text, 'origin', m.origin) ORDER BY m.seq), '[]')
               FROM messages m WHERE m.conversation_key = $1 AND m.turn_id = t.turn_id) AS rows,
            (SELECT l.tools FROM turn_tool_lists p JOIN tool_lists l USING (hash)
              WHERE p.transcript_key = t.conversation_key AND p.turn_id = t.turn_id) AS tools,
            (SELECT coalesce(jsonb_object_agg(s.call_key, s.cost_usd::float8), '{}')
               FROM model_spend s WHERE s.turn_id = t.turn_id) AS costs,
            (SELECT coalesce(jsonb_object_agg(c.call_index, c.model), '{}')
               FROM model_calls c WHERE c.turn_id = t.turn_id AND c.error IS NULL) AS models
       FROM held JOIN turns t USING (turn_id)
      WHERE t.status NOT IN ('queued', 'running')
      ORDER BY held.first`,
    [conversationKey],
  );
  return rows;
}

/** What a query of recorded conversations may ask for. */
export interface RecordedQuery {
  /** A turn of the conversation ended so (replied, skipped, error, …). */
  outcome?: string;
  since?: string;
  until?: string;
  /** A turn of the conversation called a tool server's tool. */
  withToolCalls?: boolean;
  limit: number;
}

/** The agent's conversations with a finished turn that matches, latest first (a fork is not a recording). */
export async function queryConversations(db: Queryable, agentId: string, q: RecordedQuery): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT c.conversation_id AS id FROM conversations c
      WHERE c.agent_id = $1
        AND NOT EXISTS (SELECT 1 FROM conversation_forks f WHERE f.conversation_key = c.key)
        AND EXISTS (
          SELECT 1 FROM turns t WHERE t.conversation_key = c.key AND t.status NOT IN ('queued', 'running')
             AND ($2::text IS NULL OR t.status = $2)
             AND ($3::timestamptz IS NULL OR t.created_at >= $3)
             AND ($4::timestamptz IS NULL OR t.created_at < $4)
             AND (NOT $5 OR EXISTS (
                   SELECT 1 FROM tool_calls k WHERE k.transcript_key = c.key AND k.turn_id = t.turn_id)))
      ORDER BY c.created_at DESC LIMIT $6`,
    [agentId, q.outcome ?? null, q.since ?? null, q.until ?? null, q.withToolCalls ?? false, q.limit],
  );
  return rows.map((r) => r.id);
}
