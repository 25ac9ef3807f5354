/**
 * The model provider contract, in the shape of Anthropic's Messages API: a system prompt, messages of content
 * blocks and tool definitions in; content blocks, a stop reason and usage out. Every provider (anthropic,
 * scripted, and any later one) implements `ModelProvider`; the model activity is the only caller.
 */

export interface TextBlock {
  type: 'text';
  text: string;
}
export interface ToolUseBlock {
  type: 'tool_use';
  id: string;
  name: string;
  input: Record<string, unknown>;
}
export interface ToolResultBlock {
  type: 'tool_result';
  tool_use_id: string;
  content: string;
  is_error?: boolean;
  /** A tool call whose whole result Keel keeps (the content is its preview); never sent to a provider. */
  ref?: string;
}
export type ContentBlock = TextBlock | ToolUseBlock | ToolResultBlock;

export interface ModelMessage {
  role: 'user' | 'assistant';
  content: ContentBlock[];
}

export interface ToolDefinition {
  name: string;
  description: string;
  input_schema: Record<string, unknown>;
}

export interface ModelRequest {
  model: string;
  system: string;
  messages: ModelMessage[];
  tools: ToolDefinition[];
  maxTokens: number;
}

export type StopReason = 'end_turn' | 'tool_use' | 'max_tokens' | 'stop_sequence' | 'pause_turn' | 'refusal';

export interface ModelUsage {
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
}

export interface ModelResponse {
  content: (TextBlock | ToolUseBlock)[];
  stopReason: StopReason;
  usage: ModelUsage;
  /** The model the provider actually used. */
  model: string;
}

/** What a provider may use of its caller: progress, cancellation and the conversation it serves. */
export interface ModelCallContext {
  /** 1 for the first try of this model call, 2 for Temporal's first retry, … */
  attempt: number;
  /** Conversation key (workflow id) and turn, for providers that script per conversation. */
  conversationKey: string;
  turnId: string;
  /** Which model call of the turn this is (1-based); with turnId it names the call across retries. */
  callIndex: number;
  /** Called for each streamed text fragment. */
  onTextDelta(delta: string): void;
  /** Keeps the call alive for Temporal; also where cancellation is noticed. */
  heartbeat(): void;
  /** Aborted when Temporal cancels the call (an interrupting message). */
  signal: AbortSignal;
  /** Waits, giving up early with the abort reason when the call is cancelled. */
  sleep(ms: number): Promise<void>;
}

export interface ModelProvider {
  readonly name: 'anthropic' | 'scripted';
  call(request: ModelRequest, ctx: ModelCallContext): Promise<ModelResponse>;
}

/** Failures a provider throws; the model activity turns them into Temporal failures of the matching kind. */
export class ModelRetryableError extends Error {
  constructor(
    message: string,
    /** The server's requested delay (Retry-After), when it gave one. */
    readonly retryAfterMs?: number,
    /** The HTTP status, when the provider answered one (429: its rate limit). */
    readonly status?: number,
  ) {
    super(message);
    this.name = 'ModelRetryableError';
  }
}

/** A request the model will never accept as sent (400, 401, 403, 404, 413, 422): retrying cannot help. */
export class ModelRequestError extends Error {
  constructor(
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'ModelRequestError';
  }
}

export const ZERO_USAGE: ModelUsage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };

/** A turn's or a delegate's model step. The transcript travels by reference: the step reads it up to `throughSeq`. */
export interface CallModelInput {
  conversationKey: string;
  agentId: string;
  turnId: string;
  callIndex: number;
  throughSeq: number;
  toolNames: string[];
  /** Set for a delegate's model calls: its system prompt is its task, skills and instructions. */
  delegateId?: string;
  /** The workflow a person's decision on a tool call goes to, when not the conversation's own (a job's run). */
  workflowId?: string;
}

/** One model step, committed to the transcript at `seq` before the workflow hears of it. */
export interface ModelStep {
  seq: number;
  stopReason: StopReason;
  content: (TextBlock | ToolUseBlock)[];
  /** What the call used and cost, as the ledger holds it: shown with the activity's result in the Temporal UI. */
  spend?: CallSpend;
  /**
   * The calls of Keel's own tools whose input does not fit the tool offered, each with the error the model reads;
   * the others' inputs in `content` are as their schema parsed them. Unset in steps recorded before the check moved
   * out of the workflow (issue 27).
   */
  inputErrors?: ToolInputErrors;
}

/** Errors of a model step's tool calls, by tool use id. */
export type ToolInputErrors = Record<string, string>;

/** What one model call used and cost, as the ledger holds it. */
export interface CallSpend {
  model: string;
  inputTokens: number;
  outputTokens: number;
  cacheReadTokens: number;
  cacheWriteTokens: number;
  costUsd: number;
  reservedUsd: number;
}
