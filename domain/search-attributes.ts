import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/** Typed search attributes operators filter by in the Temporal UI (the dev server allows 10 Keyword slots). */
export const SA = {
  agentId: defineSearchAttributeKey('KeelAgentId', SearchAttributeType.KEYWORD),
  conversationId: defineSearchAttributeKey('KeelConversationId', SearchAttributeType.KEYWORD),
  kind: defineSearchAttributeKey('KeelKind', SearchAttributeType.KEYWORD),
  outcome: defineSearchAttributeKey('KeelOutcome', SearchAttributeType.KEYWORD),
  jobId: defineSearchAttributeKey('KeelJobId', SearchAttributeType.KEYWORD),
  /** `<appId>/<slug>` of a routine's runs. */
  routine: defineSearchAttributeKey('KeelRoutine', SearchAttributeType.KEYWORD),
};

export const ALL_SEARCH_ATTRIBUTES = Object.values(SA);
