/**
 * What one cached conversation workflow costs the workflow thread: the bundle's size, and the V8 heap a worker keeps
 * per conversation workflow waiting in its cache. The SDK's reusable context evaluates the bundle's modules once per
 * workflow (only preloaded ones are shared), so whatever a workflow module builds at load time is paid per workflow.
 *
 * The worker runs in this process in debug mode, which runs workflows on this thread with the same reusable context
 * as a worker thread, so `process.memoryUsage()` sees their heap. Its activities answer the conversation's start-up
 * reads with "nothing open": each workflow then waits for work on its idle timer, cached.
 *
 * `npx tsx bench/workflow-heap.ts [bundle.js]` prints the figures for a bundle built elsewhere (an older commit's).
 */
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import v8 from 'node:v8';
import vm from 'node:vm';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import { CONVERSATION_WORKFLOW } from '../contracts/conversation';
import { startDevServer } from '../scripts/dev-server';
import { freePort } from '../scripts/ports';
import { bundleWorkflows } from '../worker/bundle';
import { round } from './measure';

export interface WorkflowHeap {
  bundleBytes: number;
  workflows: number;
  heapPerWorkflowKiB: number;
}

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

async function heapUsed(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    gc();
    await new Promise((r) => setImmediate(r));
  }
  return process.memoryUsage().heapUsed;
}

/** The start-up reads of a conversation with no open turn and no delegate out. */
const nothingOpen = {
  openTurns: async () => [],
  resumeConversation: async () => ({ turns: [], delegateWork: false }),
  admitDelegateOutcomes: async () => ({ admitted: [], live: [] }),
};

export async function workflowHeap(temporalAddress: string, code: string, workflows = 200): Promise<WorkflowHeap> {
  const taskQueue = `heap-${randomUUID().slice(0, 8)}`;
  const native = await NativeConnection.connect({ address: temporalAddress });
  const connection = await Connection.connect({ address: temporalAddress });
  const client = new Client({ connection });
  const worker = await Worker.create({
    connection: native,
    taskQueue,
    workflowBundle: { code },
    activities: nothingOpen,
    debugMode: true,
    maxCachedWorkflows: workflows + 10,
  });
  const ids: string[] = [];
  try {
    return await worker.runUntil(async () => {
      // One workflow first, so the bundle itself and the SDK's shared state are in the baseline.
      const start = async () => {
        const id = `heap-${randomUUID()}`;
        ids.push(id);
        await client.workflow.start(CONVERSATION_WORKFLOW, {
          taskQueue,
          workflowId: id,
          args: [{ agentId: 'bench', conversationId: id, idleMs: 3_600_000 }],
        });
      };
      const settled = async (cached: number) => {
        for (;;) {
          const s = worker.getStatus();
          if (s.numCachedWorkflows >= cached && s.numInFlightWorkflowActivations === 0) return;
          await new Promise((r) => setTimeout(r, 50));
        }
      };
      await start();
      await settled(1);
      const before = await heapUsed();
      for (let i = 0; i < workflows; i += 20) await Promise.all(Array.from({ length: 20 }, start));
      await settled(workflows + 1);
      const after = await heapUsed();
      return {
        bundleBytes: Buffer.byteLength(code),
        workflows,
        heapPerWorkflowKiB: round((after - before) / workflows / 1024),
      };
    });
  } finally {
    await Promise.all(
      ids.map((id) =>
        client.workflow
          .getHandle(id)
          .terminate('bench done')
          .catch(() => undefined),
      ),
    );
    await connection.close();
    await native.close();
  }
}

if (require.main === module) {
  void (async () => {
    const file = process.argv[2];
    const code = file ? await readFile(file, 'utf8') : await bundleWorkflows();
    const server = await startDevServer({ port: await freePort() });
    try {
      console.log(JSON.stringify(await workflowHeap(server.address, code)));
    } finally {
      await server.stop();
    }
  })().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
