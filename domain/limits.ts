/** The numbers Keel keeps from its seeds, in one place. */
export const LIMITS = {
  /** A message text over this many UTF-8 bytes is refused (413 text_too_large). */
  messageTextBytes: 32 * 1024,
  /** Any request body over this is refused (413 body_too_large). */
  requestBodyBytes: 1024 * 1024,
  /** A channel turn makes at most this many model calls (Spacebot: channel max turns). */
  modelCallsPerTurn: 5,
  /** A retrigger turn (relaying delegate results) makes at most this many. */
  modelCallsPerRetriggerTurn: 3,
  /** A reply blocked by the guard goes back to the model at most this many times. */
  guardCorrections: 2,
  /** Longest `wait` on POST .../messages, in seconds. */
  maxWaitSeconds: 120,
  /** Deliveries: attempts before an outcome `error:*` is recorded. */
  deliveryAttempts: 6,
} as const;

/** Ids in paths: agentId, conversationId, appId, routine slug. */
export const ID_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;
