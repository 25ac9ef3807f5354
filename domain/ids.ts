/** Temporal workflow ids are what operators search for in the UI; they are built here only. */
export function conversationWorkflowId(agentId: string, conversationId: string): string {
  return `conv:${agentId}:${conversationId}`;
}

export function delegateWorkflowId(agentId: string, delegateId: string): string {
  return `delegate:${agentId}:${delegateId}`;
}

/** The key a conversation is stored under in PostgreSQL is its workflow id. */
export type ConversationKey = string;

/** Idempotency key of the reply delivery of one turn; the same key on every retry and replay. */
export function replyEffectKey(conversationKey: ConversationKey, turnId: string, modelCall: number): string {
  return `${conversationKey}/turn/${turnId}/reply/${modelCall}`;
}

/** Transcript rows carry an origin so that an activity retried after a crash appends nothing twice. */
export const transcriptOrigin = {
  userMessage: (messageId: string) => `msg:${messageId}`,
  modelCall: (turnId: string, call: number) => `turn:${turnId}:call:${call}`,
  toolResults: (turnId: string, call: number) => `turn:${turnId}:results:${call}`,
  note: (turnId: string, what: string) => `turn:${turnId}:note:${what}`,
};

export function reflectionWorkflowId(agentId: string): string {
  return `reflect:${agentId}`;
}
