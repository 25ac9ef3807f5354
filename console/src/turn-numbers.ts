import type { TurnGroup } from './transcript';

/**
 * Each finished turn's number, 1-based in the order the turns ran, as a fork counts them (its `atTurn`): a turn's
 * messages are written as it starts, one turn at a time, so the order of their first message is the order of the
 * turns. Notes outside any turn and delegates' results are no turn; a turn split by a note is counted once.
 */
export function turnNumbers(finished: readonly TurnGroup[]): ReadonlyMap<string, number> {
  const numbers = new Map<string, number>();
  for (const g of finished)
    if (g.turnId !== null && g.turnId !== 'delegation' && !numbers.has(g.turnId))
      numbers.set(g.turnId, numbers.size + 1);
  return numbers;
}
