import { publishDelta } from '../db/events';
import type { Pool } from '../db/pool';

/**
 * Streamed model text goes to live event streams by NOTIFY, never into workflow history; a lost delta is only a
 * delta. One NOTIFY at a time per conversation, so deltas arrive in order and a fast stream holds one connection at
 * most.
 */
export function textDeltaPublisher(pool: Pool): (conversationKey: string, turnId: string, delta: string) => void {
  const sending = new Map<string, Promise<void>>();
  return (key, turnId, delta) => {
    const next = (sending.get(key) ?? Promise.resolve())
      .then(() => publishDelta(pool, key, turnId, delta))
      .catch(() => undefined);
    sending.set(key, next);
    void next.then(() => sending.get(key) === next && sending.delete(key));
  };
}
