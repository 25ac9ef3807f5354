import { CancelledFailure } from '@temporalio/common';
import { appendToTranscript, beginTurn, type AppendInput } from './conversation-turn';
import { getAgent } from '../db/agents';
import { appendTranscript, findByOrigin, messageWaits, loadTranscript } from '../db/conversations';
import { delegateBrief } from '../db/delegates';
import { currentMemory, memoryVersion } from '../db/memory';
import { readTurnCall, type TurnCallReads } from '../db/turn-call-reads';
import { commitModelAnswer } from '../db/model-answer';
import { recordModelCall, type ModelCallRecord } from '../db/model-calls';
import type { Pool } from '../db/pool';
import { callSpend } from '../db/spend';
import { delegateSystemPrompt, taskMessage } from '../domain/delegation';
import { serversUnderCandidate } from '../domain/evals';
import { conversationWorkflowId, JOB_CONVERSATION_PREFIX, transcriptOrigin } from '../domain/ids';
import { memoryPrompt, type MemoryFiles } from '../domain/memory';
import type { PinnedTool } from '../domain/tool-servers';
import { ZERO_USAGE, type CallModelInput, type ModelMessage, type ModelRequest, type ModelStep } from '../domain/model';
import { channelSystemPrompt } from '../domain/prompts';
import type { Payer } from '../domain/spend';
import { checkToolCalls, toolDefinitions } from '../domain/tools';
import { TRANSCRIPT_WINDOW, textOf, toModelMessages, trimWindowStart } from '../domain/transcript';
import { meteredModelCall, type ModelCallDeps } from './model-call';
import type { Step } from './step';
import { withWholeResults } from './tool-results';
import { serverToolDefinitions, turnTools } from './turn-tools';

export interface ConversationModelDeps extends ModelCallDeps {
  defaultModel: string;
  /** Streamed text, for live event streams; never part of workflow history. */
  onTextDelta?: (conversationKey: string, turnId: string, delta: string) => void;
}

const MAX_TOKENS = 4096;

/**
 * A channel turn's model request: Keel's rules, the agent's memory and instructions, the transcript, Keel's own tools
 * and the servers' tools offered. An evaluation builds its requests here too, so that it asks what a turn would.
 */
export function channelRequest(c: {
  model: string;
  name: string;
  systemPrompt: string | null;
  memory: MemoryFiles;
  messages: ModelMessage[];
  toolNames: readonly string[];
  serverTools: readonly PinnedTool[];
}): ModelRequest {
  return {
    model: c.model,
    system: channelSystemPrompt({ name: c.name, systemPrompt: c.systemPrompt, memory: memoryPrompt(c.memory) }),
    messages: c.messages,
    tools: [...toolDefinitions(c.toolNames), ...serverToolDefinitions(c.serverTools)],
    maxTokens: MAX_TOKENS,
  };
}

/** What a turn writes to its transcript before a model call, in the call's own step (a turn in one workflow task). */
export interface BeforeModelCall {
  /** The turn's first call: its message goes into the transcript and the turn is marked running. */
  begin?: { messageIds: string[] };
  /** Tool results, a note and steered messages since the last call. */
  append?: Omit<AppendInput, 'conversationKey' | 'turnId'>;
}

/**
 * A turn's model step with its transcript writes before it: one step instead of two. Answers `ended` when the turn
 * had ended already (its message handed over twice). Each write is idempotent, so a retried step writes nothing twice.
 */
export async function callTurnModel(
  deps: ConversationModelDeps,
  input: CallModelInput & { before: BeforeModelCall },
  step: Step,
): Promise<ModelStep | { ended: true }> {
  const { before, ...call } = input;
  const { conversationKey, turnId } = call;
  let throughSeq: number | null = call.throughSeq;
  if (before.begin)
    throughSeq = await beginTurn(deps, { conversationKey, turnId, messageIds: before.begin.messageIds });
  if (throughSeq === null) return { ended: true };
  if (before.append) throughSeq = await appendToTranscript(deps, { conversationKey, turnId, ...before.append });
  return callConversationModel(deps, { ...call, throughSeq }, step);
}

/**
 * A turn's or a delegate's model step: the model is called once and its answer appended to the transcript, in the
 * transaction its spending settles in. Commit before completion: a call an earlier attempt committed is returned as
 * it was, never made twice. Interrupted by a newer message, it keeps what was streamed as a partial answer.
 */
export async function callConversationModel(
  deps: ConversationModelDeps,
  input: CallModelInput,
  step: Step,
): Promise<ModelStep> {
  const { pool } = deps;
  const origin = transcriptOrigin.modelCall(input.turnId, input.callIndex);
  // The reads a request is built from: a turn's in one statement, a delegate's at once.
  const toolsOf = (allowedServers: string[] | null) =>
    turnTools(pool, {
      agentId: input.agentId,
      transcriptKey: input.conversationKey,
      turnId: input.turnId,
      allowedServers,
    });
  const { earlier, agent, brief, transcript, memory, turnServerTools, jobRun } = input.delegateId
    ? await delegateCallReads(pool, input, origin, input.delegateId)
    : await turnCallReads(pool, input, origin);
  if (earlier)
    return withSpend(pool, origin, stepFrom(earlier.seq, earlier.content as ModelStep['content'], input.toolNames));

  const model = agent?.model ?? deps.defaultModel;
  const [messages, serverTools] = await Promise.all([
    withWholeResults(pool, toModelMessages(trimWindowStart(transcript))),
    turnServerTools ?? toolsOf(brief ? brief.toolServers : null),
  ]);
  const request: ModelRequest = brief
    ? {
        model,
        system: delegateSystemPrompt({ ...brief, task: taskMessage(brief.title, brief.description) }),
        messages,
        tools: [...toolDefinitions(input.toolNames), ...serverToolDefinitions(serverTools)],
        maxTokens: MAX_TOKENS,
      }
    : channelRequest({
        model,
        name: agent?.name ?? input.agentId,
        systemPrompt: agent?.systemPrompt ?? null,
        memory: memory?.files ?? {},
        messages,
        toolNames: input.toolNames,
        serverTools,
      });
  const started = Date.now();
  const callRecord = (stopReason: string | null, usage = ZERO_USAGE, error?: string): ModelCallRecord => ({
    conversationKey: input.conversationKey,
    turnId: input.turnId,
    callIndex: input.callIndex,
    attempt: step.attempt,
    provider: deps.provider.name,
    model,
    stopReason,
    usage,
    durationMs: Date.now() - started,
    error,
  });
  let partial = '';
  // A turn's call is cancelled on request by an interrupting message, which the API recorded before it reached the
  // workflow; also when its run is terminated and the worker drops it, which leaves no partial answer. A delegate's
  // call is cancelled on request only by the delegate's own cancel.
  const interruptedByMessage = async () =>
    step.cancelRequested() &&
    (input.delegateId !== undefined || (await messageWaits(pool, input.conversationKey, ['interrupt'])));
  // Progress shows in the Temporal UI as the activity's heartbeat details.
  const heartbeat = () => step.heartbeat({ streamedChars: partial.length });
  const { committed, spend } = await meteredModelCall(deps, {
    callKey: origin,
    payer: payerOf(input, brief?.conversationKey, jobRun),
    agentBudgets: agent?.budgets ?? {},
    ...(jobRun ? { ownRunBudget: jobRun.budget } : {}),
    request,
    context: {
      attempt: step.attempt,
      conversationKey: input.conversationKey,
      turnId: input.turnId,
      callIndex: input.callIndex,
      onTextDelta: (d) => {
        partial += d;
        deps.onTextDelta?.(input.conversationKey, input.turnId, d);
      },
      heartbeat,
      signal: step.signal,
      sleep: (ms) => step.sleep(ms),
    },
    // The answer, its usage and its spend commit in one statement; if another attempt committed first, its answer is
    // the one.
    commitWithSpend: async (db, res, settle) => {
      const entry = { role: 'assistant' as const, content: res.content, text: textOf(res.content), origin };
      const { conversationKey, turnId } = input;
      const call = callRecord(res.stopReason, res.usage);
      const { seq, added, spend } = await commitModelAnswer(db, { conversationKey, turnId, entry, call, settle });
      // Added now, it is this answer; otherwise an earlier attempt's, read back.
      const value = added ? { seq, content: res.content } : (await findByOrigin(db, conversationKey, origin))!;
      return { value, ...(spend ? { spend } : {}) };
    },
    failed: async (err) => {
      if (await interruptedByMessage()) {
        // Interrupted by a newer message: keep what was streamed so far as the assistant's partial answer. Not under
        // the call's own origin, so that it can never be mistaken for a finished answer.
        if (partial) {
          await appendTranscript(pool, input.conversationKey, input.turnId, [
            {
              role: 'assistant',
              content: [{ type: 'text', text: partial }],
              text: `${partial} [interrupted]`,
              origin: transcriptOrigin.partialModelCall(input.turnId, input.callIndex),
            },
          ]);
        }
        return new CancelledFailure('model call interrupted');
      }
      // A worker shutting down or a heartbeat timeout also aborts the call: that attempt simply fails and is retried.
      const error = err instanceof Error ? err.message : String(err);
      await recordModelCall(pool, callRecord(null, ZERO_USAGE, error)).catch(() => undefined);
      return err;
    },
  });
  const answer = stepFrom(committed.seq, committed.content as ModelStep['content'], input.toolNames);
  // The spend came back with its settle; a commit another attempt made first is read.
  return spend ? { ...answer, spend } : withSpend(pool, origin, answer);
}

/** A turn's reads before its model call: one statement (db/turn-call-reads.ts); memory is made on its first use. */
async function turnCallReads(pool: Pool, input: CallModelInput, origin: string) {
  const { agentId, conversationKey, turnId } = input;
  const jobId = jobOfConversation(agentId, conversationKey);
  const read = underFork(
    await readTurnCall(pool, {
      conversationKey,
      origin,
      agentId,
      throughSeq: input.throughSeq,
      window: TRANSCRIPT_WINDOW,
      turnId,
      ...(jobId === undefined ? {} : { jobId }),
    }),
  );
  const forkMemory = read.fork?.candidate.memoryVersion;
  const [memory, turnServerTools] = await Promise.all([
    forkMemory === undefined
      ? (read.memory ?? currentMemory(pool, agentId))
      : memoryVersion(pool, agentId, forkMemory).then(async (v) => v ?? (await currentMemory(pool, agentId))),
    turnTools(pool, { agentId, transcriptKey: conversationKey, turnId, allowedServers: null }, read),
  ]);
  return { ...read, brief: undefined, memory, turnServerTools };
}

/** A fork's turn reads the agent as its candidate overlays it: prompt, model, budgets and tool servers. */
function underFork(read: TurnCallReads): TurnCallReads {
  if (!read.fork) return read;
  const { candidate } = read.fork;
  const agent = read.agent && {
    ...read.agent,
    systemPrompt: candidate.systemPrompt === undefined ? read.agent.systemPrompt : candidate.systemPrompt,
    model: candidate.model ?? read.agent.model,
    budgets: { ...read.agent.budgets, ...candidate.budgets },
  };
  return { ...read, ...(agent ? { agent } : {}), servers: serversUnderCandidate(read.servers, candidate) };
}

/** A delegate's reads before its model call; its tools are read once its brief says which servers it may use. */
async function delegateCallReads(pool: Pool, input: CallModelInput, origin: string, delegateId: string) {
  const [earlier, agent, brief, transcript] = await Promise.all([
    findByOrigin(pool, input.conversationKey, origin),
    getAgent(pool, input.agentId),
    delegateBrief(pool, delegateId),
    loadTranscript(pool, input.conversationKey, input.throughSeq, TRANSCRIPT_WINDOW),
  ]);
  return { earlier, agent, brief, transcript, memory: undefined, turnServerTools: undefined, jobRun: undefined };
}

/** The job whose conversation this is, if it is a job's. */
function jobOfConversation(agentId: string, conversationKey: string): string | undefined {
  const jobKeyPrefix = conversationWorkflowId(agentId, JOB_CONVERSATION_PREFIX);
  return conversationKey.startsWith(jobKeyPrefix) ? conversationKey.slice(jobKeyPrefix.length) : undefined;
}

/**
 * Who a model call of a turn or a delegate is charged to: a job's conversation charges the job's run under way, which
 * the turn's reads found.
 */
function payerOf(input: CallModelInput, delegateOf: string | undefined, jobRun: { runId?: string } | undefined): Payer {
  const { agentId, conversationKey, turnId, delegateId } = input;
  if (delegateId) return { agentId, kind: 'delegate', conversationKey, delegateId, rootConversationKey: delegateOf };
  const jobId = jobOfConversation(agentId, conversationKey);
  if (jobId !== undefined) {
    const jobRunId = jobRun?.runId;
    return { agentId, kind: 'job', conversationKey, turnId, jobId, ...(jobRunId ? { jobRunId } : {}) };
  }
  return { agentId, kind: 'turn', conversationKey, turnId };
}

/** The step as the workflow takes it: the calls of Keel's own tools checked here, never in the workflow. */
function stepFrom(seq: number, content: ModelStep['content'], offered: readonly string[]): ModelStep {
  const stopReason = content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn';
  return { seq, stopReason, ...checkToolCalls(content, offered) };
}

/** The step with what its call used and cost, as the ledger holds it. */
async function withSpend(pool: Pool, callKey: string, step: ModelStep): Promise<ModelStep> {
  const spend = await callSpend(pool, callKey);
  return spend ? { ...step, spend } : step;
}
