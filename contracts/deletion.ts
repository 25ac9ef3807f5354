/** A person's deletion of a conversation, or of an agent and everything it owns: the API's DELETE routes start it. */
export const DELETION_WORKFLOW = 'deletionWorkflow';

export interface DeletionInput {
  deletionId: string;
  agentId: string;
  /** The conversation to delete; the whole agent when absent. */
  conversationId?: string;
  /** Who asked, as the audit trail records it. */
  actor: string;
}

/** What a deletion did: counts, never content. */
export interface DeletionOutcome {
  conversations: number;
  workflowsEnded: number;
  schedulesDeleted: number;
  /** Rows erased from PostgreSQL (a ledger entry emptied of its request counts); absent for an older deletion's. */
  rowsErased?: number;
}

export type DeletionWorkflow = (input: DeletionInput) => Promise<DeletionOutcome>;
