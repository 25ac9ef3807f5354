/** A routine run's journal of capability calls (`routine_calls`): a run executed again answers its calls from it. */
import type { Delivery } from '../domain/delivery';
import type { Queryable } from './pool';

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
