import type { Delivery } from './delivery';

/**
 * The shapes of Keel's REST API that the console reads (docs/api.md and /docs/json). Only what the page shows; fields
 * marked optional may be absent from older servers.
 */

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

export interface DecisionLink {
  method: 'POST';
  path: string;
}

interface WaitingBase {
  agentId: string;
  id: string;
  waitingSince: string;
  expiresAt: string;
  approve: DecisionLink;
  reject: DecisionLink;
}

export interface RoutineRunApproval extends WaitingBase {
  kind: 'routine_run';
  appId: string;
  slug: string;
  label: string;
  /** `target`: where the gated call would send. */
  gate: { capability: string; detail: string; target?: Delivery };
}

export interface MemoryChange {
  file: string;
  action: string;
  summary: string;
  rationale: string;
  conversationIds: string[];
}

export interface FileChange {
  path: string;
  before: string | null;
  after: string | null;
}

export interface ProposalApproval extends WaitingBase {
  kind: 'proposal';
  files: FileChange[];
  summary?: string;
  reason?: string;
  rationale?: string;
  changes?: MemoryChange[];
  conversationIds?: string[];
  checks?: { name: string; kind: 'hard' | 'soft'; passed: boolean; detail?: string }[];
}

export interface ToolCallApproval extends WaitingBase {
  kind: 'tool_call';
  server: string;
  tool: string;
  modelName: string;
  /** Exactly what the call will be sent with, if approved. */
  arguments: Record<string, unknown>;
  origin: { kind: 'conversation' | 'delegate'; conversationKey: string; turnId: string; delegateId: string | null };
}

export type Approval = RoutineRunApproval | ProposalApproval | ToolCallApproval;

export type ToolPolicy = 'auto' | 'approve' | 'deny';

/** A tool call as a transcript shows it; `server` is set for a tool server's tool. */
export interface TranscriptToolCall {
  toolUseId: string;
  name: string | null;
  arguments: Record<string, unknown> | null;
  result: string;
  isError: boolean;
  server?: {
    id: string;
    server: string;
    tool: string;
    policy: ToolPolicy;
    status: string;
    decidedBy: string | null;
    note: string | null;
    durationMs: number | null;
  };
}

export interface TranscriptMessage {
  seq: number;
  role: 'user' | 'assistant' | 'system' | 'tool';
  text: string;
  at: string;
  turnId: string | null;
  /** On tool rows: each tool call the row answers. */
  toolCalls?: TranscriptToolCall[];
}

export interface ServerTool {
  name: string;
  modelName: string;
  description: string;
  annotations: { title?: string; readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean };
  policy: ToolPolicy;
}

export interface ToolServer {
  name: string;
  transport: 'http' | 'stdio';
  url: string | null;
  command: string | null;
  args: string[];
  headers: Record<string, { hasSecret: true; fingerprint: string }>;
  env: Record<string, { hasSecret: true; fingerprint: string }>;
  policies: Record<string, ToolPolicy>;
  defaultPolicy: ToolPolicy | null;
  enabled: boolean;
  tools: ServerTool[];
  toolsListedAt: string;
}

export interface ConversationView {
  conversationId: string;
  state: { busy: boolean; queued: number; liveDelegates: string[] };
  messages: TranscriptMessage[];
}

export interface ConversationSummary {
  conversationId: string;
  workflowId: string;
  lastActivityAt: string;
  turns: number;
  lastTurn: {
    turnId: string;
    status: string;
    messageText: string;
    replyText: string | null;
    deliveryOutcome: string | null;
    finishedAt: string | null;
  } | null;
}

export const OUTCOME_KINDS = ['success', 'partial', 'timeout', 'blocked', 'cancelled', 'failed'] as const;

export interface Delegate {
  delegateId: string;
  conversationId: string;
  taskNumber?: number;
  lifecycle: string;
  outcome?: {
    kind: (typeof OUTCOME_KINDS)[number];
    result: string;
    outcomeVersion: number;
    transcriptVersion: number;
    terminalOwner: string;
  };
  admittedAt?: string;
  relay?: string;
  budgetBlocked?: string;
  admissions: { outcomeVersion: number; decision: string; via: string; at: string }[];
}

export interface Task {
  number: number;
  title: string;
  description: string;
  status: string;
  requiredSkills: string[];
  historyMode: string;
  wallClockSeconds: number;
  createdAt: string;
  updatedAt: string;
}

export type JobSchedule =
  { kind: 'at'; at: string } | { kind: 'every'; intervalMs: number } | { kind: 'cron'; expr: string; tz?: string };

export interface Job {
  id: string;
  name: string;
  description: string | null;
  status: 'active' | 'paused' | 'completed' | 'failed';
  schedule: JobSchedule;
  task: string;
  nextRunAt: string | null;
  runCount: number;
  consecutiveErrors: number;
  budgetUsd: number | null;
  createdBy: string;
  createdAt: string;
}

export interface JobRun {
  runId: string;
  firedAt: string;
  finishedAt?: string | null;
  status: 'running' | 'ok' | 'error' | 'skipped';
  reply?: string;
  error?: string;
  delivery: { outcome: string | null; attempts: number };
  budgetBlocked?: string;
}

export interface Routine {
  appId: string;
  slug: string;
  label: string;
  schedule: { expr: string; tz?: string };
  cron: string;
  prompt: string | null;
  status: 'active' | 'paused';
  nextRunAt: string | null;
  budgetUsd: number | null;
}

export interface RoutineRun {
  runId: string;
  workflowId: string;
  status: string;
  digest: string | null;
  gate?: { capability: string; detail: string };
  artifactId?: string;
  firedAt: string;
  finishedAt: string | null;
  tool: { name: string; version: number; authored: boolean } | null;
  decision: { approved: boolean; note?: string; at: string } | null;
}

export interface SavedTool {
  name: string;
  version: number;
  title: string;
  purpose: string;
  inputs: string[];
  code: string;
  authoredBy: string;
  createdAt: string;
}

export interface Artifact {
  artifactId: string;
  title: string;
  content: string;
  createdAt: string;
}

export interface MemoryVersion {
  version: number;
  kind: 'initial' | 'proposal' | 'rollback';
  proposalId: string | null;
  changes: MemoryChange[];
  learnedFrom: string[];
  rollbackOf: number | null;
  createdAt: string;
}

export interface MemoryVersionFiles extends MemoryVersion {
  files: Record<string, string>;
}

export interface ReflectionState {
  queued: { conversationId: string; fromSeq: number; toSeq: number; outcome: string; failures: number }[];
  draining: boolean;
  awaiting: string | null;
  drains: number;
  live: boolean;
  lastDrain: Record<string, unknown> | null;
  poisoned: { conversationId: string; failures: number; proposalId: string | null; at: string }[];
  gateLog: { conversationId: string; turnId: string; evolve: boolean; reason: string; at: string }[];
  spentTodayUsd: number;
}

export interface UsageGroup {
  key: string | null;
  calls: number;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  costUsd: number;
}

export interface Usage {
  from: string;
  to: string;
  groupBy: string;
  total: Omit<UsageGroup, 'key'>;
  groups: UsageGroup[];
}

export interface Budget {
  name: string;
  limitUsd: number;
  counts: string;
  spentUsd?: number;
  reservedUsd?: number;
  leftUsd?: number;
}

export interface ConsoleConfig {
  temporalUiUrl: string | null;
  namespace: string;
}

/** A run whose workflow task keeps failing (GET …/failing-runs): it makes no progress until reset. */
export interface FailingRun {
  runId: string;
  workflowId: string;
  workflowType: string;
  cause: 'nondeterminism' | 'error';
  failures: number;
  attempt: number;
  lastMessage: string;
  lastAt: string;
}
