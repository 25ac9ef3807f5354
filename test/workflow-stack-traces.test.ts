import type { ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { conversationWorkflowId } from '../domain/ids';
import { stopProcess } from '../scripts/processes';
import { startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { startWorkerProcess, waitForPollers } from './support/workers';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

/** A Keel with one worker process, started as users start it, and a conversation it has answered. */
async function answeredConversation(env: Record<string, string>): Promise<{ keel: TestKeel; workflowId: string }> {
  const keel = await startTestKeel({ worker: false });
  cleanups.push(() => keel.stop());
  const worker: ChildProcess = startWorkerProcess(keel, inject('databaseUrl'), env);
  cleanups.push(() => stopProcess(worker));
  await waitForPollers(keel, [worker]);
  const [a, c] = [uniqueId('a'), uniqueId('c')];
  const posted = await keel.post(a, c, { text: 'hello' }, { wait: 30 });
  expect(posted.body.reply?.text).toBe('echo: hello');
  return { keel, workflowId: conversationWorkflowId(a, c) };
}

describe("the worker's workflow stack traces (the Temporal UI's Stack Trace tab)", () => {
  it('are off by default: the query says so, and the conversation goes on', async () => {
    const { keel, workflowId } = await answeredConversation({});
    const handle = keel.client.workflow.getHandle(workflowId);
    await expect(handle.query('__stack_trace')).rejects.toThrow('Workflow stack traces are not enabled on this worker');
    expect((await handle.describe()).status.name).toBe('RUNNING');
  }, 120_000);

  it('are on with KEEL_WORKFLOW_STACK_TRACES=on: the conversation shows where it waits', async () => {
    const { keel, workflowId } = await answeredConversation({ KEEL_WORKFLOW_STACK_TRACES: 'on' });
    const stack = await keel.client.workflow.getHandle(workflowId).query<string>('__stack_trace');
    // An answered conversation waits for its next message, on its idle timer.
    expect(stack).toMatch(/at waitForWork \(\S*\/workflows\/conversation\.ts:\d+:\d+\)/);
  }, 120_000);
});
