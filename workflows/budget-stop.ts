import { ActivityFailure, ApplicationFailure } from '@temporalio/workflow';
import { FAILURE } from '../domain/failures';

/** The budget's words when a model call was not made because a budget would be overrun (docs/spend.md). */
export function budgetStopOf(err: unknown): string | undefined {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  return cause instanceof ApplicationFailure && cause.type === FAILURE.budgetExhausted ? cause.message : undefined;
}
