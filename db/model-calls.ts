import type { ModelUsage } from '../domain/model';
import type { Queryable } from './pool';

export interface ModelCallRecord {
  conversationKey: string;
  turnId: string;
  callIndex: number;
  attempt: number;
  provider: string;
  model: string;
  stopReason: string | null;
  usage: ModelUsage;
  durationMs: number;
  error?: string;
}

/** A model call attempt's row as an INSERT, its parameters numbered from `first` (also a part of a WITH). */
export function modelCallSql(first: number, r: ModelCallRecord): { sql: string; params: unknown[] } {
  const values = Array.from({ length: 13 }, (_, i) => `$${first + i}`).join(', ');
  const sql = `INSERT INTO model_calls (conversation_key, turn_id, call_index, attempt, provider, model, stop_reason,
       input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, duration_ms, error)
     VALUES (${values})`;
  const { usage } = r;
  const params = [r.conversationKey, r.turnId, r.callIndex, r.attempt, r.provider, r.model, r.stopReason];
  const counts = [usage.inputTokens, usage.outputTokens, usage.cacheReadTokens, usage.cacheWriteTokens];
  return { sql, params: [...params, ...counts, Math.round(r.durationMs), r.error ?? null] };
}

/** Tokens in, out, cache read and cache write, per model call attempt. */
export async function recordModelCall(db: Queryable, r: ModelCallRecord): Promise<void> {
  const { sql, params } = modelCallSql(1, r);
  await db.query(sql, params);
}
