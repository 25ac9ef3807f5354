/** Names of Temporal ApplicationFailure types Keel raises on purpose; workflows branch on these, never on text. */
export const FAILURE = {
  /** The model refused the request as sent (HTTP 400-class): the turn ends in error, nothing retried. */
  modelRequest: 'KeelModelRequestError',
  /** A scripted `/error` turn: a non-retryable model failure. */
  modelTurnError: 'KeelModelTurnError',
  /** The model call was retried and may be retried again: Temporal's retry policy absorbs it. */
  modelRetryable: 'KeelModelRetryable',
} as const;

export const NON_RETRYABLE_MODEL_FAILURES: string[] = [FAILURE.modelRequest, FAILURE.modelTurnError];
