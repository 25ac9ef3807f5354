/**
 * Every Temporal workflow and Schedule id, every conversation id Keel makes up, and the keys derived from them are
 * built here only: operators search for them in the UI, and PostgreSQL stores conversations under them.
 */

/** The key a conversation is stored under in PostgreSQL is its workflow id. */
export type ConversationKey = string;

export function conversationWorkflowId(agentId: string, conversationId: string): string {
  return `conv:${agentId}:${conversationId}`;
}

/** The delegate's workflow, which is also the key of its own transcript. */
export function delegateWorkflowId(agentId: string, delegateId: string): string {
  return `delegate:${agentId}:${delegateId}`;
}

/** The conversation id recorded for a delegate's transcript. */
export function delegateConversationId(delegateId: string): string {
  return `delegate:${delegateId}`;
}

export function reflectionWorkflowId(agentId: string): string {
  return `reflect:${agentId}`;
}

/** An operator's replay of a run, served by a worker (contracts/replay-run.ts); its memo names the run. */
export function replayRunWorkflowId(nonce: string): string {
  return `replay:${nonce}`;
}

/** A job's Temporal Schedule, and the workflow id prefix of its runs (Temporal appends the fire time). */
export function jobScheduleId(jobId: string): string {
  return `job:${jobId}`;
}

/** Conversations Keel keeps for its own runs begin so; reflection learns from users' conversations only. */
export const JOB_CONVERSATION_PREFIX = 'sched:';
export const ROUTINE_CONVERSATION_PREFIX = 'routine:';

/** The conversation a job's runs are turns of. */
export function jobConversationId(jobId: string): string {
  return `${JOB_CONVERSATION_PREFIX}${jobId}`;
}

/** A routine's Temporal Schedule, and the workflow id prefix of its runs (Temporal appends the fire time). */
export function routineScheduleId(agentId: string, appId: string, slug: string): string {
  return `routine:${agentId}:${appId}:${slug}`;
}

/**
 * A job or routine run started by "run now": unique, so that it never collides with a fire of the same second (a
 * triggered fire's workflow id ends in its second, and Temporal drops a start whose id is taken).
 */
export function runNowWorkflowId(scheduleId: string, nonce: string): string {
  return `${scheduleId}-now-${nonce}`;
}

/** The conversation a routine's runs are recorded in (its transcript, the run's sessionId). */
export function routineConversationId(appId: string, slug: string): string {
  return `${ROUTINE_CONVERSATION_PREFIX}${appId}:${slug}`;
}

/** Idempotency key of the reply delivery of one turn; the same key on every retry and replay. */
export function replyEffectKey(conversationKey: ConversationKey, turnId: string, modelCall: number): string {
  return `${conversationKey}/turn/${turnId}/reply/${modelCall}`;
}

/**
 * Idempotency key of a call of a tool server's tool: the model step that asked for it and its tool_use id. The server
 * receives it in `_meta`; the effects ledger and the tool call's record are kept under it.
 */
export function toolCallKey(transcriptKey: string, turnId: string, callIndex: number, toolUseId: string): string {
  return `${transcriptKey}/turn/${turnId}/call/${callIndex}/tool/${toolUseId}`;
}

/** The owner's notice that a tool call waits for a decision: once per call. */
export function toolApprovalNoticeEffectKey(callId: string): string {
  return `tool-call/${callId}/approval-notice`;
}

/** Idempotency key of the delivery of a job run's result. */
export function jobDeliveryEffectKey(runId: string): string {
  return `${runId}/delivery`;
}

/** The owner's notice that a budget stopped a model call: once per agent, budget and period. */
export function budgetNoticeEffectKey(agentId: string, periodKey: string): string {
  return `budget-notice:${agentId}:${periodKey}`;
}

/** Idempotency key of the notice to a job's owner that the job failed for good. */
export function jobFailedNoticeEffectKey(jobId: string, runId: string): string {
  return `job:${jobId}/failed-notice/${runId}`;
}

/** The owner hears once of a conversation run whose turns cannot finish, however many runs wait on it. */
/** The owner's notice of a job's run ended stuck (its workflow task kept failing): once per run. */
export function stuckJobRunNoticeEffectKey(runId: string): string {
  return `${runId}/stuck-notice`;
}

export function stuckConversationNoticeEffectKey(conversationKey: string, conversationRunId: string): string {
  return `${conversationKey}/stuck-notice/${conversationRunId}`;
}

/** Transcript rows carry an origin so that an activity retried after a crash appends nothing twice. */
export const transcriptOrigin = {
  userMessage: (messageId: string) => `msg:${messageId}`,
  modelCall: (turnId: string, call: number) => `turn:${turnId}:call:${call}`,
  /** What an interrupted model call had streamed: never under the call's own origin, never a finished answer. */
  partialModelCall: (turnId: string, call: number) => `turn:${turnId}:call:${call}:partial`,
  toolResults: (turnId: string, call: number) => `turn:${turnId}:results:${call}`,
  note: (turnId: string, what: string) => `turn:${turnId}:note:${what}`,
  retrigger: (turnId: string) => `retrigger:${turnId}`,
  /** A delegate's task message, the first row of its own transcript. */
  task: 'task',
  /** A forked delegate's copy of its conversation: the note before it, then each row by its seq. */
  forkNote: 'fork:note',
  fork: (seq: number) => `fork:${seq}`,
  /** A conversation fork's copy of a row of its source: its seq there, then its origin there. */
  forked: (seq: number, origin: string) => `forked:${seq}:${origin}`,
  delegateFinished: (delegateId: string, outcomeVersion: number) => `delegate-finished:${delegateId}:${outcomeVersion}`,
  backgroundResult: (delegateId: string) => `background:${delegateId}`,
  routineRun: (runId: string, part: 'prompt' | 'digest') => `routine-run:${runId}:${part}`,
};

/** A conversation event's key (db/events.ts): its type and what it is about, so a retried step publishes it once. */
export function conversationEventId(type: string, ...about: (string | number)[]): string {
  return [type, ...about].join(':');
}

/** The message a job run's attempt asks its conversation with: one per attempt, the same on every retry. */
export function jobTurnMessageId(runId: string, attempt: number): string {
  return `${runId}#${attempt}`;
}

/** A queued turn summary of reflection, by conversation and turn. */
export function turnSummaryKey(s: { conversationId: string; turnId: string }): string {
  return `${s.conversationId}#${s.turnId}`;
}

/** The advisory lock that orders an agent's spend reservations. */
export function spendLockKey(agentId: string): string {
  return `spend:${agentId}`;
}

/** Reflection's model calls, each booked under its key in reflection's cost ledger and, prefixed, in spend's. */
export const reflectionCallKey = {
  gate: (turnId: string) => `gate:${turnId}`,
  tier: (proposalId: string, tier: number) => `${proposalId}:tier${tier}`,
  judge: (proposalId: string, judge: number) => `${proposalId}:judge${judge}`,
  spend: (callKey: string) => `reflect:${callKey}`,
};

/** Keys of a routine run's calls: its capabilities' effects (upsert, send, integration), `ai.*` and authoring. */
export const routineCallKey = {
  effect: (runId: string, at: number, effect: 'upsert' | 'send' | 'integration') => `${runId}/call/${at}/${effect}`,
  ai: (runId: string, at: number) => `${runId}/ai/${at}`,
  /** The model call that writes the run's tool: 1, or 2 for its repair. */
  authoring: (runId: string, call: number) => `${runId}/authoring/${call}`,
};

/** The workflow that deletes a conversation or an agent; the deletion's id is in it, so a deletion can be polled. */
export function deletionWorkflowId(agentId: string, deletionId: string): string {
  return `delete:${agentId}:${deletionId}`;
}

/** An evaluation's workflow, and one of its cases' children. */
export function evalWorkflowId(agentId: string, evalId: string): string {
  return `eval:${agentId}:${evalId}`;
}
export function evalCaseWorkflowId(agentId: string, evalId: string, position: number): string {
  return `eval:${agentId}:${evalId}:case:${position}`;
}

/** The key an evaluation's case is charged under (a spend row's conversation). */
export function evalConversationKey(evalId: string, caseId: string): string {
  return `eval:${evalId}:${caseId}`;
}

/** The spend key of an evaluation's model call (a live model's answer, or the judge's). */
export const evalCallKey = {
  model: (evalId: string, caseId: string, turn: number, callIndex: number) =>
    `eval:${evalId}:${caseId}:${turn}:${callIndex}`,
  judge: (evalId: string, caseId: string, check: number) => `eval:${evalId}:${caseId}:judge:${check}`,
};

/** A fork's conversation: a new conversation under its own id. */
export function forkConversationId(nonce: string): string {
  return `fork-${nonce}`;
}
