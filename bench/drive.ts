/**
 * How the bench drives Keel (through its API, as clients do) and the floor workflows (through Temporal), shared by
 * the scenarios.
 */
import { WithStartWorkflowOperation } from '@temporalio/client';
import type { KeelStack } from '../scripts/keel-stack';
import { ConversationEvents } from './measure';

/** The task queue of the bench's own worker, which runs the baseline workflows. */
export const BENCH_QUEUE = 'bench';
export const AGENT = 'bench';
/** A realistic user message (~100 bytes), the same for Keel and the baseline. */
export const text = (i: number) =>
  `Turn ${i}: please summarise the latest figures for the quarterly report and flag anything unusual.`;
export const MIB = 1024 * 1024;
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));

/** POST a message; with `wait` the API answers once the turn is done (or gives up waiting, status `accepted`). */
export async function submit(
  stack: Pick<KeelStack, 'api'>,
  conversationId: string,
  body: Record<string, unknown>,
  wait = 0,
  agent = AGENT,
): Promise<{ turnId: string; status: string; reply?: { text?: string } }> {
  for (;;) {
    const res = await fetch(
      `${stack.api}/v1/agents/${agent}/conversations/${conversationId}/messages${wait ? `?wait=${wait}` : ''}`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      },
    );
    if (res.status === 503) continue; // the worker was busy beyond the API's deadline: the messageId makes a retry safe
    if (!res.ok) throw new Error(`submit ${conversationId}: ${res.status} ${await res.text()}`);
    return (await res.json()) as { turnId: string; status: string; reply?: { text?: string } };
  }
}

export const eventsOf = (stack: KeelStack, conversationId: string, agent = AGENT) =>
  ConversationEvents.open(`${stack.api}/v1/agents/${agent}/conversations/${conversationId}/events`);

/** One turn timed from the POST to its `turn.finished` event on the conversation's open event stream. */
export async function timedTurn(
  stack: KeelStack,
  events: ConversationEvents,
  conversationId: string,
  messageId: string,
  i: number,
): Promise<number> {
  const t0 = performance.now();
  const { turnId } = await submit(stack, conversationId, { text: text(i), messageId });
  return (await events.awaitTurn(turnId)) - t0;
}

/** Sequential turns of one Keel conversation, each timed from the POST to its `turn.finished` event. */
export async function keelTurns(
  stack: KeelStack,
  conversationId: string,
  count: number,
  each?: (turn: number) => Promise<void>,
): Promise<number[]> {
  const events = await eventsOf(stack, conversationId);
  const latencies: number[] = [];
  try {
    for (let i = 1; i <= count; i++) {
      latencies.push(await timedTurn(stack, events, conversationId, `${conversationId}-${i}`, i));
      await each?.(i);
    }
  } finally {
    events.close();
  }
  return latencies;
}

/** The floor conversation's update-with-start operation. */
export const floorStart = (workflowId: string) =>
  new WithStartWorkflowOperation('bareConversation', {
    workflowId,
    taskQueue: BENCH_QUEUE,
    workflowIdConflictPolicy: 'USE_EXISTING',
  });

/** Runs `count` tasks, `concurrency` at a time, in index order. */
export async function pool(count: number, concurrency: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(count, concurrency) }, async () => {
      while (next < count) await task(next++);
    }),
  );
}
