import { Context } from '@temporalio/activity';
import type { DeletionInput, DeletionOutcome } from '../contracts/deletion';
import type { Pool } from '../db/pool';
import { endRunningWork, eraseDeleted, recordDeletionFinished } from '../services/deletion';
import { currentStep, heartbeatWhile } from '../services/step';

/** Each step heartbeats while it works: one held by a killed worker is retried elsewhere once its heartbeats stop. */
const beating = <T>(work: Promise<T>): Promise<T> => {
  const step = currentStep();
  return heartbeatWhile(work, () => step.heartbeat());
};

export function deletionActivities(deps: { pool: Pool }) {
  return {
    /** The deleted thing's Schedules removed and its open workflows terminated, naming the deletion. */
    endDeletedWork: (input: DeletionInput) => beating(endRunningWork(deps.pool, Context.current().client, input)),
    /** Its rows erased; the effects ledger's keys and the audit trail stay. */
    eraseDeleted: (input: DeletionInput) => beating(eraseDeleted(deps.pool, input)),
    recordDeletionFinished: (input: DeletionInput, outcome: DeletionOutcome) =>
      recordDeletionFinished(deps.pool, input, outcome),
  };
}
