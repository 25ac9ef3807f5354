/** Names of Temporal ApplicationFailure types Keel raises on purpose; workflows branch on these, never on text. */
export const FAILURE = {
  /** The model refused the request as sent (HTTP 400-class): the turn ends in error, nothing retried. */
  modelRequest: 'KeelModelRequestError',
  /** A scripted `/error` turn: a non-retryable model failure. */
  modelTurnError: 'KeelModelTurnError',
  /** The model call was retried and may be retried again: Temporal's retry policy absorbs it. */
  modelRetryable: 'KeelModelRetryable',
  /** PostgreSQL refused the data of a message (SQLSTATE class 22): retrying would hold the conversation forever. */
  invalidInput: 'KeelInvalidInput',
  /** The turn a reply belongs to has no row: there is nothing to deliver. */
  turnMissing: 'KeelTurnMissing',
  /** A model call waits for its place under the provider's rate limit: retried when the place is due. */
  modelRateLimited: 'KeelModelRateLimited',
  /** A budget would be overrun by a model call's worst case: the call is not made (details: the budget). */
  budgetExhausted: 'KeelBudgetExhausted',
  /** A delivery attempt failed in a way the next attempt may not. */
  deliveryRetryable: 'KeelDeliveryRetryable',
} as const;

export const NON_RETRYABLE_MODEL_FAILURES: string[] = [
  FAILURE.modelRequest,
  FAILURE.modelTurnError,
  FAILURE.budgetExhausted,
];

/** Why a workflow's task fails: a nondeterminism error (code and history disagree), or any other error. */
export type WorkflowTaskFailureCause = 'nondeterminism' | 'error';

/** The cause, from a failure's text: core's TMPRL1100 message, or its debug rendering's NonDeterministicError. */
export function workflowTaskFailureCause(failure: string): WorkflowTaskFailureCause {
  return /TMPRL1100|Nondeterminism|NonDeterministicError/.test(failure) ? 'nondeterminism' : 'error';
}
