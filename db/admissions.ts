import type { PoolClient } from 'pg';
import type { AdmittedResult, DelegateFinished, OutcomeKind, TerminalOwner } from '../domain/delegation';
import { admissionDecision, type AdmissionDecision } from '../domain/outcome-admission';
import { inTransaction, type Pool, type Queryable } from './pool';

/**
 * Admits a delegate's outcome once: the durable row is re-read and judged by the domain's rule, and every decision
 * is recorded. The result text comes from the row, never from the signal.
 */
export async function admitOutcome(
  pool: Pool,
  conversationKey: string,
  claim: DelegateFinished,
  via: 'signal' | 'reconcile',
  batch: string,
  /** Runs in the admitting transaction, so that what admission records (a transcript note) commits with it. */
  onAdmitted: (db: PoolClient, result: AdmittedResult) => Promise<void>,
): Promise<{ decision: AdmissionDecision; result?: AdmittedResult }> {
  return inTransaction(pool, async (db) => {
    const { rows } = await db.query<{
      conversation_key: string;
      outcome_kind: OutcomeKind | null;
      result: string | null;
      outcome_version: number;
      transcript_version: number;
      terminal_owner: TerminalOwner | null;
      admitted_version: number;
      completed_at: Date | null;
    }>('SELECT * FROM delegates WHERE delegate_id = $1 FOR UPDATE', [claim.delegateId]);
    const d = rows[0];
    const decision = admissionDecision(
      conversationKey,
      claim,
      d && {
        conversationKey: d.conversation_key,
        committed: d.completed_at !== null && d.outcome_version !== 0,
        outcomeKind: d.outcome_kind,
        outcomeVersion: d.outcome_version,
        transcriptVersion: d.transcript_version,
        terminalOwner: d.terminal_owner,
        admittedVersion: d.admitted_version,
      },
    );
    if (d) {
      await db.query(
        `INSERT INTO delegate_admissions (delegate_id, outcome_version, decision, via, batch)
         VALUES ($1, $2, $3, $4, $5)`,
        [claim.delegateId, claim.outcomeVersion, decision, via, batch],
      );
    }
    if (decision !== 'admitted' || !d) return { decision };
    await db.query(
      'UPDATE delegates SET admitted_version = outcome_version, admitted_at = now() WHERE delegate_id = $1',
      [claim.delegateId],
    );
    const result: AdmittedResult = { delegateId: claim.delegateId, kind: d.outcome_kind!, result: d.result ?? '' };
    await onAdmitted(db, result);
    return { decision, result };
  });
}

/** What an earlier attempt of the same admission call admitted (its reply to the workflow was lost). */
export async function admittedInBatch(db: Queryable, batch: string): Promise<string[]> {
  const { rows } = await db.query<{ delegate_id: string }>(
    `SELECT delegate_id FROM delegate_admissions WHERE batch = $1 AND decision = 'admitted' ORDER BY id`,
    [batch],
  );
  return rows.map((r) => r.delegate_id);
}

/**
 * Whether a fresh run of the conversation has admission work: a live delegate (liveDelegateIds), a committed outcome
 * not yet admitted (unadmittedOutcomes) or an admitted result never relayed (unrelayedResults). A conversation that
 * never delegated then starts without the admission step.
 */
export async function hasDelegateWork(db: Queryable, conversationKey: string): Promise<boolean> {
  const { rows } = await db.query<{ work: boolean }>(
    `SELECT EXISTS (
       SELECT 1 FROM delegates WHERE conversation_key = $1 AND (completed_at IS NULL
         OR admitted_version < outcome_version
         OR (admitted_version > 0 AND admitted_version = outcome_version AND relay IS NULL))
     ) AS work`,
    [conversationKey],
  );
  return rows[0]?.work ?? false;
}

/** Admitted results no retrigger relayed or noted: after a run was terminated, a fresh run relays them. */
export async function unrelayedResults(db: Queryable, conversationKey: string): Promise<string[]> {
  const { rows } = await db.query<{ delegate_id: string }>(
    `SELECT delegate_id FROM delegates
      WHERE conversation_key = $1 AND admitted_version > 0 AND admitted_version = outcome_version AND relay IS NULL
      ORDER BY admitted_at`,
    [conversationKey],
  );
  return rows.map((r) => r.delegate_id);
}

/** Committed outcomes of the conversation that were never admitted (their signal was lost or not yet handled). */
export async function unadmittedOutcomes(db: Queryable, conversationKey: string): Promise<DelegateFinished[]> {
  const { rows } = await db.query<{
    delegate_id: string;
    outcome_version: number;
    transcript_version: number;
    outcome_kind: OutcomeKind;
    terminal_owner: TerminalOwner;
  }>(
    `SELECT delegate_id, outcome_version, transcript_version, outcome_kind, terminal_owner FROM delegates
      WHERE conversation_key = $1 AND completed_at IS NOT NULL AND admitted_version < outcome_version
      ORDER BY completed_at`,
    [conversationKey],
  );
  return rows.map((r) => ({
    delegateId: r.delegate_id,
    outcomeVersion: r.outcome_version,
    transcriptVersion: r.transcript_version,
    outcomeKind: r.outcome_kind,
    terminalOwner: r.terminal_owner,
  }));
}

/** Admitted results, in the order asked, with their text from the durable rows. */
export async function admittedResults(db: Queryable, delegateIds: readonly string[]): Promise<AdmittedResult[]> {
  const { rows } = await db.query<{ delegate_id: string; outcome_kind: OutcomeKind; result: string }>(
    'SELECT delegate_id, outcome_kind, result FROM delegates WHERE delegate_id = ANY($1)',
    [delegateIds],
  );
  const byId = new Map(rows.map((r) => [r.delegate_id, r]));
  return delegateIds.flatMap((id) => {
    const r = byId.get(id);
    return r ? [{ delegateId: id, kind: r.outcome_kind, result: r.result }] : [];
  });
}

/** What became of admitted results: relayed by a retrigger turn, its relay failed, or noted in the transcript. */
export async function markRelay(
  db: Queryable,
  delegateIds: readonly string[],
  relay: 'relayed' | 'relay_failed' | 'noted',
): Promise<void> {
  await db.query('UPDATE delegates SET relay = $2 WHERE delegate_id = ANY($1)', [delegateIds, relay]);
}
