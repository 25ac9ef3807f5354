import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { conversationWorkflowId } from '../domain/ids';
import { spawnTs } from '../scripts/processes';
import { historyJson } from '../services/run-history';
import { bundleWorkflows } from '../worker/bundle';
import { startTestKeel, uniqueId } from './support/keel';

// Real histories of every workflow type, recorded by `npm run record-histories` (test/histories). They must replay
// against the current workflow code: a change that would break running workflows fails here.
const DIR = path.resolve(__dirname, 'histories');
const recorded = readdirSync(DIR)
  .filter((f) => f.endsWith('.json'))
  .sort()
  .map((f) => ({
    workflowId: path.basename(f, '.json'),
    file: path.join(DIR, f),
    history: historyJson.parse(readFileSync(path.join(DIR, f), 'utf8')),
  }));

/** Runs `npm run replay -- …` (the script itself) and collects its output and exit code. */
function replayCli(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; out: string }> {
  const child = spawnTs('scripts/replay.ts', { ...process.env, ...env }, ['ignore', 'pipe', 'pipe'], args);
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve) => child.once('exit', (code) => resolve({ code, out })));
}

describe('the recorded-history corpus', () => {
  it('holds every workflow type: conversation across continue-as-new, delegate, job, routine, reflection, …', () => {
    const types = recorded.map(
      (r) => r.history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name,
    );
    expect(new Set(types)).toEqual(
      new Set([
        'conversationWorkflow',
        'delegateWorkflow',
        'jobRunWorkflow',
        'routineRunWorkflow',
        'reflectionWorkflow',
        'evalWorkflow',
        'evalCaseWorkflow',
        'deletionWorkflow',
      ]),
    );
    const ended = recorded.map((r) => r.history.events?.at(-1)?.eventType);
    expect(ended).toContain(temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW);
  });

  it.each(recorded.map((r) => [r.workflowId, r] as const))(
    '%s replays against the current workflow code',
    async (_name, r) => {
      await expect(
        Worker.runReplayHistory(
          { workflowBundle: { codePath: inject('workflowBundlePath') } },
          r.history,
          r.workflowId,
        ),
      ).resolves.toBeUndefined();
    },
  );
});

describe('a deliberately non-deterministic edit is caught', () => {
  let bundle: string;
  beforeAll(async () => {
    bundle = await bundleWorkflows({
      workflowsPath: path.resolve(__dirname, 'support', 'nondeterministic-workflows.ts'),
    });
  }, 120_000);

  it('by the replay that npm test runs', async () => {
    const conversation = recorded.find((r) => r.workflowId === 'conversation-run1')!;
    await expect(
      Worker.runReplayHistory({ workflowBundle: { code: bundle } }, conversation.history, conversation.workflowId),
    ).rejects.toThrow(/Nondeterminism|DeterminismViolation/);
  });

  it('by npm run replay, which names the workflow and the error and exits non-zero', async () => {
    const file = path.join(DIR, 'conversation-run1.json');
    const bad = await replayCli(['--file', file], {
      KEEL_WORKFLOWS_PATH: 'test/support/nondeterministic-workflows.ts',
    });
    expect(bad.code).toBe(1);
    expect(bad.out).toMatch(/FAIL {2}conversation-run1 .*(Nondeterminism|DeterminismViolation)/);
    const good = await replayCli(['--file', file]);
    expect(good.out).toContain('ok    conversation-run1');
    expect(good.code).toBe(0);
  }, 120_000);
});

describe('npm run replay against the server', () => {
  it('fetches a live conversation by workflow id, every run a visibility query finds; replays them clean', async () => {
    const keel = await startTestKeel();
    try {
      const [a, c] = [uniqueId('a'), uniqueId('c')];
      expect((await keel.post(a, c, { text: 'hello' }, { wait: 30 })).body.status).toBe('replied');
      const env = { TEMPORAL_ADDRESS: inject('temporalAddress') };
      const one = await replayCli([conversationWorkflowId(a, c)], env);
      expect(one.out).toMatch(new RegExp(`ok {4}conv:${a}:${c} `));
      expect(one.code).toBe(0);
      const many = await replayCli(['--query', `KeelAgentId = '${a}'`], env);
      expect(many.out).toContain('1 of 1 replayed cleanly');
      expect(many.code).toBe(0);
      const none = await replayCli(['--query', `KeelAgentId = 'nobody-${a}'`], env);
      expect(none.code).toBe(2);
    } finally {
      await keel.stop();
    }
  }, 120_000);
});
