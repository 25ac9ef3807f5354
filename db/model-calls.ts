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

/** Tokens in, out, cache read and cache write, per model call attempt. */
export async function recordModelCall(db: Queryable, r: ModelCallRecord): Promise<void> {
  await db.query(
    `INSERT INTO model_calls (conversation_key, turn_id, call_index, attempt, provider, model, stop_reason,
       input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, duration_ms, error)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
    [
      r.conversationKey,
      r.turnId,
      r.callIndex,
      r.attempt,
      r.provider,
      r.model,
      r.stopReason,
      r.usage.inputTokens,
      r.usage.outputTokens,
      r.usage.cacheReadTokens,
      r.usage.cacheWriteTokens,
      Math.round(r.durationMs),
      r.error ?? null,
    ],
  );
}
