/**
 * What payload encryption costs a turn: the bench's Keel (sealed, as npm start runs it) against a second Keel on the
 * same machine with KEEL_PAYLOAD_ENCRYPTION=off, their turns alternating so that both see the same moments.
 */
import { randomUUID } from 'node:crypto';
import type { KeelStack } from '../scripts/keel-stack';
import { eventsOf, keelTurns, timedTurn } from './drive';
import { percentile, round } from './measure';
import { stats } from './scenarios';

export async function sealedOverhead(sealed: KeelStack, clear: KeelStack, turns: number) {
  const conversationId = `sealed-${randomUUID().slice(0, 8)}`;
  const clearEvents = await eventsOf(clear, conversationId);
  const clearMs: number[] = [];
  try {
    const sealedMs = await keelTurns(sealed, conversationId, turns, async (i) => {
      clearMs.push(await timedTurn(clear, clearEvents, conversationId, `${conversationId}-clear-${i}`, i));
    });
    return {
      turns,
      sealed: stats(sealedMs),
      clear: stats(clearMs),
      ratioP50: round(percentile(sealedMs, 50) / percentile(clearMs, 50), 2),
    };
  } finally {
    clearEvents.close();
  }
}
