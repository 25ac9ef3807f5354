import { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { getAgent } from '../../db/agents';
import { appendTranscript, appendTranscriptTx, findByOrigin, loadTranscript } from '../../db/conversations';
import { recordModelCall } from '../../db/model-calls';
import { inTransaction, type Pool, type Queryable } from '../../db/pool';
import { FAILURE } from '../../domain/failures';
import { transcriptOrigin } from '../../domain/ids';
import {
  ModelRequestError,
  ModelRetryableError,
  ZERO_USAGE,
  type ModelProvider,
  type ModelRequest,
  type StopReason,
  type TextBlock,
  type ToolUseBlock,
} from '../../domain/model';
import { channelSystemPrompt } from '../../domain/prompts';
import { memoryPrompt } from '../../domain/memory';
import { currentMemory } from '../../db/memory';
import { delegateSystemPrompt, taskMessage } from '../../domain/delegation';
import { delegateBrief } from '../../db/delegates';
import { toolDefinitions } from '../../domain/tools';
import { TRANSCRIPT_WINDOW, textOf, toModelMessages, trimWindowStart } from '../../domain/transcript';
import { ScriptedTurnError } from '../../adapters/model/scripted';
import { heartbeatWhile } from '../heartbeat';
import { BudgetStop, reserveCall, type SpendDeps } from './metered';
import { callSpend, type CallSpend } from '../../db/spend';
import { runningRunId } from '../../db/jobs';
import { conversationWorkflowId, JOB_CONVERSATION_PREFIX } from '../../domain/ids';
import type { Payer } from '../../domain/spend';

/** The transcript travels by reference: the activity reads messages up to `throughSeq` itself. */
export interface CallModelInput {
  conversationKey: string;
  agentId: string;
  turnId: string;
  callIndex: number;
  throughSeq: number;
  toolNames: string[];
  /** Set for a delegate's model calls: its system prompt is its task, skills and instructions. */
  delegateId?: string;
}

/** One model step, committed to the transcript at `seq` before the workflow hears of it. */
export interface ModelStep {
  seq: number;
  stopReason: StopReason;
  content: (TextBlock | ToolUseBlock)[];
  /** What the call used and cost, as the ledger holds it: shown with the activity's result in the Temporal UI. */
  spend?: CallSpend;
}

export interface ModelDeps extends SpendDeps {
  pool: Pool;
  provider: ModelProvider;
  defaultModel: string;
  /** Streamed text, for live event streams; never part of workflow history. */
  onTextDelta?: (conversationKey: string, turnId: string, delta: string) => void;
}

const MAX_TOKENS = 4096;

export function modelActivities(deps: ModelDeps) {
  const { pool, provider } = deps;
  return {
    /** Calls the model once and appends its answer to the transcript. */
    callModel: async (input: CallModelInput): Promise<ModelStep> => {
      const origin = transcriptOrigin.modelCall(input.turnId, input.callIndex);
      // Commit before completion: if an earlier attempt already committed this call, return it, never call twice.
      const committed = await findByOrigin(pool, input.conversationKey, origin);
      if (committed) {
        const step = stepFrom(committed.seq, committed.content as ModelStep['content']);
        const spend = await callSpend(pool, origin);
        return spend ? { ...step, spend } : step;
      }

      const agent = await getAgent(pool, input.agentId);
      const rows = trimWindowStart(
        await loadTranscript(pool, input.conversationKey, input.throughSeq, TRANSCRIPT_WINDOW),
      );
      const ctx = Context.current();
      let partial = '';
      const started = Date.now();
      const model = agent?.model ?? deps.defaultModel;
      const record = (db: Queryable, stopReason: string | null, usage = ZERO_USAGE, error?: string) =>
        recordModelCall(db, {
          conversationKey: input.conversationKey,
          turnId: input.turnId,
          callIndex: input.callIndex,
          attempt: ctx.info.attempt,
          provider: provider.name,
          model,
          stopReason,
          usage,
          durationMs: Date.now() - started,
          error,
        });
      const brief = input.delegateId ? await delegateBrief(pool, input.delegateId) : undefined;
      const request: ModelRequest = {
        model,
        system: brief
          ? delegateSystemPrompt({ ...brief, task: taskMessage(brief.title, brief.description) })
          : channelSystemPrompt({
              name: agent?.name ?? input.agentId,
              systemPrompt: agent?.systemPrompt ?? null,
              memory: memoryPrompt((await currentMemory(pool, input.agentId)).files),
            }),
        messages: toModelMessages(rows),
        tools: toolDefinitions(input.toolNames),
        maxTokens: MAX_TOKENS,
      };
      // Budgets first: a call whose worst case would overrun one is not made (the activity fails for good).
      const reservation = await reserveCall(deps, {
        callKey: origin,
        attempt: ctx.info.attempt,
        payer: await payerOf(pool, input, brief?.conversationKey),
        request,
      }).catch((err: unknown) => {
        throw err instanceof BudgetStop ? err.toFailure() : err;
      });
      try {
        // Heartbeats on a timer as well as on stream events: a model that takes long to its first token is alive.
        const beat = () => ctx.heartbeat({ streamedChars: partial.length });
        const res = await heartbeatWhile(
          provider.call(request, {
            attempt: ctx.info.attempt,
            conversationKey: input.conversationKey,
            turnId: input.turnId,
            callIndex: input.callIndex,
            onTextDelta: (d) => {
              partial += d;
              deps.onTextDelta?.(input.conversationKey, input.turnId, d);
            },
            // Progress shows in the Temporal UI as the activity's heartbeat details.
            heartbeat: beat,
            signal: ctx.cancellationSignal,
            sleep: (ms) => ctx.sleep(ms),
          }),
          1_000,
          beat,
        );
        // The answer and its usage commit together; if another attempt committed first, its answer is the one.
        const committed = await inTransaction(pool, async (db) => {
          await appendTranscript(db, input.conversationKey, input.turnId, [
            { role: 'assistant', content: res.content, text: textOf(res.content), origin },
          ]);
          await record(db, res.stopReason, res.usage);
          await reservation.settle(db, res);
          return findByOrigin(db, input.conversationKey, origin);
        });
        const spend = await callSpend(pool, origin);
        return { ...stepFrom(committed!.seq, committed!.content as ModelStep['content']), ...(spend ? { spend } : {}) };
      } catch (err) {
        // No answer to pay for: the hold goes back (a crash leaves it to the retry, which reserves again in its place).
        await reservation.release(err).catch(() => undefined);
        if (ctx.cancellationDetails?.cancelRequested) {
          // Interrupted by a newer message: keep what was streamed so far as the assistant's partial answer. Not under
          // the call's own origin, so that it can never be mistaken for a finished answer.
          if (partial) {
            await appendTranscriptTx(pool, input.conversationKey, input.turnId, [
              {
                role: 'assistant',
                content: [{ type: 'text', text: partial }],
                text: `${partial} [interrupted]`,
                origin: `${origin}:partial`,
              },
            ]);
          }
          throw new CancelledFailure('model call interrupted');
        }
        // A worker shutting down or a heartbeat timeout also aborts the call: that attempt simply fails and is retried.
        await record(pool, null, ZERO_USAGE, err instanceof Error ? err.message : String(err)).catch(() => undefined);
        throw toTemporalFailure(err);
      }
    },
  };
}

/** Who a model call of a turn or a delegate is charged to: a job's conversation charges the job's run. */
async function payerOf(pool: Pool, input: CallModelInput, delegateOf: string | undefined): Promise<Payer> {
  const { agentId, conversationKey, turnId, delegateId } = input;
  if (delegateId) return { agentId, kind: 'delegate', conversationKey, delegateId, rootConversationKey: delegateOf };
  const jobKeyPrefix = conversationWorkflowId(agentId, JOB_CONVERSATION_PREFIX);
  if (conversationKey.startsWith(jobKeyPrefix)) {
    const jobId = conversationKey.slice(jobKeyPrefix.length);
    const jobRunId = await runningRunId(pool, jobId);
    return { agentId, kind: 'job', conversationKey, turnId, jobId, ...(jobRunId ? { jobRunId } : {}) };
  }
  return { agentId, kind: 'turn', conversationKey, turnId };
}

function stepFrom(seq: number, content: ModelStep['content']): ModelStep {
  return { seq, stopReason: content.some((b) => b.type === 'tool_use') ? 'tool_use' : 'end_turn', content };
}

/** Provider errors become Temporal failures whose type says whether a retry can help. */
function toTemporalFailure(err: unknown): unknown {
  if (err instanceof ModelRetryableError) {
    return ApplicationFailure.create({
      message: err.message,
      type: FAILURE.modelRetryable,
      // Honour the server's Retry-After instead of the policy's backoff for this one attempt.
      nextRetryDelay: err.retryAfterMs,
    });
  }
  if (err instanceof ModelRequestError)
    return ApplicationFailure.nonRetryable(err.message, FAILURE.modelRequest, { status: err.status });
  if (err instanceof ScriptedTurnError) return ApplicationFailure.nonRetryable(err.message, FAILURE.modelTurnError);
  return err;
}
