import {
  condition,
  defineUpdate,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  upsertSearchAttributes,
} from '@temporalio/workflow';
import { SA } from '../domain/search-attributes';
import type { ContentBlock, ModelMessage } from '../domain/model';
import type { BaselineActivities } from './baseline-activities';

const { modelWithTranscript, deliver, noop } = proxyActivities<BaselineActivities>({ startToCloseTimeout: '1 minute' });

/** One user message; answers with the reply once the turn is done. */
export const say = defineUpdate<string, [string]>('say');
/** One bare turn: `steps` empty activities in a row (one step: the minimal turn the bytes per turn are held to). */
export const bareTurn = defineUpdate<void, [number]>('bareTurn');

/**
 * The transcript-in-history conversation: the design Keel is compared against. The transcript lives in workflow
 * state and is passed whole into every model activity, so each turn adds the whole conversation to history again.
 */
export async function transcriptInHistoryConversation(): Promise<void> {
  const transcript: ModelMessage[] = [];
  let turns = 0;
  setHandler(say, async (text) => {
    transcript.push({ role: 'user', content: [{ type: 'text', text }] });
    const content: ContentBlock[] = await modelWithTranscript({ messages: transcript, callIndex: ++turns });
    transcript.push({ role: 'assistant', content });
    const call = content.find((b) => b.type === 'tool_use');
    const input = call && call.type === 'tool_use' ? (call.input as { text?: unknown }) : {};
    const reply = typeof input.text === 'string' ? input.text : '';
    await deliver({ text: reply });
    if (call && call.type === 'tool_use')
      transcript.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: 'delivered' }] });
    return reply;
  });
  await condition(() => false);
}

/** The floor: a long-lived workflow whose turns are `steps` empty activities, and nothing else. */
export async function bareConversation(): Promise<void> {
  setHandler(bareTurn, async (steps) => {
    for (let i = 0; i < steps; i++) await noop();
  });
  await condition(() => false);
}

/** The burst's floor: a workflow that does nothing, started by a Temporal Schedule (only its start is measured). */
export async function emptyWorkflow(): Promise<void> {}

const { noop: localNoop, durableRun } = proxyLocalActivities<BaselineActivities>({ startToCloseTimeout: '1 minute' });

/**
 * The burst's second floor: Temporal's part of a Keel job run and nothing else. Its Schedule starts it with a job
 * run's search attributes and memo; it takes one empty local step (a run at once) and upserts its outcome, as a run
 * that ends does.
 */
export async function jobRunFootprint(_input: { jobId: string }): Promise<void> {
  await localNoop();
  upsertSearchAttributes([{ key: SA.outcome, value: 'ok' }]);
}

/**
 * The burst's third floor: the least a durable job run does on Temporal, with nothing of Keel's in it. The
 * footprint's workflow whose one local step claims the run, commits an answer, sends it to the job's webhook and books
 * the run (baseline-activities.ts `durableRun`).
 */
export async function jobRunDurableFloor(input: { jobId: string; url: string }): Promise<void> {
  await durableRun({ runId: input.jobId, url: input.url });
  upsertSearchAttributes([{ key: SA.outcome, value: 'ok' }]);
}

const { callShop } = proxyActivities<BaselineActivities>({ startToCloseTimeout: '1 minute' });

/** One call of the shop's read-only tool: the tool bench's floor turn. */
export const toolTurn = defineUpdate<string, [{ url: string; orderId: string; emptySteps: number }]>('toolTurn');

/**
 * The tool bench's floors: a long-lived workflow whose turn is one activity calling the same MCP server Keel's turn
 * calls, after `emptySteps` empty activities (0: the bare floor; Keel's other steps per turn: the same-steps floor).
 */
export async function toolFloor(): Promise<void> {
  setHandler(toolTurn, async ({ url, orderId, emptySteps }) => {
    for (let i = 0; i < emptySteps; i++) await noop();
    return callShop({ url, orderId });
  });
  await condition(() => false);
}
