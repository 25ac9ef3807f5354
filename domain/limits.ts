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
  /** Longest workflow id the runs routes take (Temporal's default limit.maxIDLength). */
  workflowIdChars: 1000,
  /** Longest path segment the router hands to the schemas (above every id's own limit); longer ones are 414. */
  pathParamChars: 4096,
  /** A JSON value a request gives as it is (a record's column, a tool call's arguments) nests at most this deep. */
  jsonDepth: 100,
} as const;

/** Ids in paths: agentId, conversationId, appId, routine slug. */
export const ID_PATTERN = /^[A-Za-z0-9._-]{1,128}$/;
/**
 * A conversation as it can be read: one a client names (ID_PATTERN), or one Keel runs for a job or a routine, whose
 * id joins up to three such parts with `:` (`sched:<jobId>`, `routine:<appId>:<slug>`). Only reading takes those.
 */
export const READABLE_CONVERSATION_ID_PATTERN = /^[A-Za-z0-9._-]{1,128}(:[A-Za-z0-9._-]{1,128}){0,2}$/;
