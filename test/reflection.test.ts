import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { reflectionWorkflowId } from '../domain/ids';
import { scriptedProvider } from '../worker/wiring';
import type { ModelRequest } from '../domain/model';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { failedChecks, propose, reflectionApi, skipWithEdits, type ReflectionView } from './support/reflection';

// Keels of their own settings, each on its own task queue: the defaults drain at 5 queued or every 180 minutes.
let story: TestKeel; // drains at 5, no approval needed
let eager: TestKeel; // drains at 1, no approval needed
let approving: TestKeel; // drains at 1, persona.md waits for a human (the default)
let retrying: TestKeel; // drains at 1 and every 300 ms
let frugal: TestKeel; // drains at 1, a ceiling one drain exceeds
let strict: TestKeel; // drains at 1, with the "worth learning?" gate and two judges
let hasty: TestKeel; // drains at 1, persona.md waits for a human 1 s
const requests: ModelRequest[] = [];

beforeAll(async () => {
  [story, eager, approving, retrying, frugal, strict, hasty] = await Promise.all([
    startTestKeel({
      reflection: { approvalFiles: [] },
      provider: (pool) => {
        const scripted = scriptedProvider(pool);
        return { name: 'scripted', call: (r, c) => (requests.push(r), scripted.call(r, c)) };
      },
    }),
    startTestKeel({ reflection: { drainAtQueued: 1, approvalFiles: [] } }),
    startTestKeel({ reflection: { drainAtQueued: 1 } }),
    startTestKeel({ reflection: { drainAtQueued: 1, drainEveryMs: 300, approvalFiles: [] } }),
    startTestKeel({ reflection: { drainAtQueued: 1, approvalFiles: [], dailyCostCeilingUsd: 0.000_001 } }),
    startTestKeel({ reflection: { drainAtQueued: 1, approvalFiles: [], gate: true, judges: 2 } }),
    startTestKeel({ reflection: { drainAtQueued: 1, approvalWaitMs: 1_000 } }),
  ]);
});
afterAll(async () => Promise.all([story, eager, approving, retrying, frugal, strict, hasty].map((k) => k?.stop())));

const PERSONA = '# Persona\n\nYou answer in French, briefly.\n';

describe('reflection admission through the REST API with the scripted model', () => {
  it('five conversations trigger a drain admitting version 2; the next turn carries the new persona', async () => {
    const r = reflectionApi(() => story);
    const a = uniqueId('a');
    await r.agent(a);
    for (let i = 1; i <= 4; i++) await r.say(a, `c${i}`, `hello from conversation ${i}`);
    // A turn is answered before its summary reaches reflection (finishTurn signals after the commit): await the 4.
    await eventually(async () => (await r.state(a)).queued.length === 4, 30_000, 'four turns queued for reflection');
    expect(await r.proposals(a)).toEqual([]);
    await r.say(a, 'c5', propose([{ file: 'persona.md', content: PERSONA, conversationIds: ['c5'] }]));

    const p = await r.nthProposal(a, 1);
    expect(p).toMatchObject({ status: 'admitted', version: 2, conversationIds: ['c1', 'c2', 'c3', 'c4', 'c5'] });
    expect(p.checks.filter((c) => c.kind === 'hard').every((c) => c.passed)).toBe(true);
    expect(await r.memory(a)).toMatchObject({ version: 2, files: { 'persona.md': PERSONA } });
    const versions = (
      await r.call<{ version: number; kind: string; proposalId: string | null; learnedFrom: string[] }[]>(
        'GET',
        `/v1/agents/${a}/memory/versions`,
      )
    ).body;
    expect(versions.map((v) => [v.version, v.kind])).toEqual([
      [1, 'initial'],
      [2, 'proposal'],
    ]);
    expect(versions[1]).toMatchObject({ proposalId: p.id, learnedFrom: ['c1', 'c2', 'c3', 'c4', 'c5'] });
    expect((await r.state(a)).queued).toEqual([]);

    requests.length = 0;
    await r.say(a, 'c6', 'bonjour');
    const channel = requests.filter((q) => q.tools.some((t) => t.name === 'reply'));
    expect(channel.at(-1)?.system).toContain('You answer in French, briefly.');
  });

  it('a skip changes nothing, even with edits attached to it', async () => {
    const r = reflectionApi(() => eager);
    const edits = [{ file: 'user-profile.md', content: '# User profile\n\n- likes tea\n' }];
    // The same edits as an ok proposal are admitted: they pass every gate, so only the skip keeps them out below.
    const control = uniqueId('a');
    await r.agent(control);
    await r.say(control, 'c1', propose(edits));
    expect(await r.nthProposal(control, 1)).toMatchObject({ status: 'admitted', version: 2 });
    expect((await r.memory(control)).files['user-profile.md']).toBe('# User profile\n\n- likes tea\n');

    const a = uniqueId('a');
    await r.agent(a);
    const before = await r.memory(a);
    await r.say(a, 'c1', skipWithEdits(edits));
    expect(await r.nthProposal(a, 1)).toMatchObject({ status: 'skipped' });
    expect(await r.memory(a)).toEqual(before);
    expect(before.version).toBe(1);
    expect(before.files['user-profile.md']).not.toContain('likes tea');
    // The contract's list leaves skipped drains out; ?all=true shows them.
    expect((await r.call<unknown[]>('GET', `/v1/agents/${a}/proposals`)).body).toEqual([]);
  });

  it("turns of an agent without reflection, and of its jobs' conversations, are never sent to reflection", async () => {
    const r = reflectionApi(() => eager);
    const a = uniqueId('a');
    await r.call('PUT', `/v1/agents/${a}`, { name: a });
    await r.say(a, 'c1', 'before reflection was enabled');
    await r.agent(a);
    // A job's run is a turn of the conversation sched:<jobId>.
    const job = await r.call<{ id: string }>('POST', `/v1/agents/${a}/jobs`, {
      name: 'digest',
      schedule: { kind: 'every', intervalMs: 3_600_000 },
      task: 'a scheduled task',
    });
    await r.call('POST', `/v1/agents/${a}/jobs/${job.body.id}/run`);
    await eventually(
      async () =>
        (await r.call<{ status: string }[]>('GET', `/v1/agents/${a}/jobs/${job.body.id}/runs`)).body.some(
          (x) => x.status === 'ok',
        ),
      30_000,
      'the job run',
    );
    await r.say(a, 'c2', 'after');
    // Signals arrive in order: once c2's summary was handled, c1's and the job's would have been too.
    const state = await eventuallyState(r, a, (x) => x.drains >= 1);
    expect((await r.proposals(a)).map((p) => p.conversationIds)).toEqual([['c2']]);
    expect(state.queued).toEqual([]);
  });
});

describe('every hard gate rejects a proposal whole, named in GET proposals, the memory unchanged', () => {
  const fence = '```';
  it.each([
    ['writable_files', [{ file: 'memory/agent-notes.md', action: 'new' as const, content: '# Notes\n' }]],
    ['constitution_unchanged', [{ file: 'constitution.md', content: '# Constitution\n\nAnything goes.\n' }]],
    ['canonical_files_kept', [{ file: 'user-profile.md', action: 'delete' as const }]],
    [
      'growth_limits',
      [
        {
          file: 'domain-knowledge.md',
          content: `# Domain knowledge\n${Array.from({ length: 81 }, (_, i) => `- fact ${i}`).join('\n')}\n`,
        },
      ],
    ],
    ['no_file_emptied', [{ file: 'user-profile.md', content: '' }]],
    ['balanced_fences', [{ file: 'domain-knowledge.md', content: `# Domain knowledge\n\n${fence}sh\nnpm start\n` }]],
    ['no_credentials', [{ file: 'user-profile.md', content: '# User profile\n\n- their api_key=abc123 works\n' }]],
  ])('%s', async (gate, edits) => {
    const r = reflectionApi(() => eager);
    const a = uniqueId('a');
    await r.agent(a);
    // A second, harmless edit in the same proposal: rejected with it, since proposals are admitted or rejected whole.
    await r.say(
      a,
      'c1',
      propose([...edits, { file: 'memory/principles.md', content: '# Principles\n\n- be brief\n' }]),
    );
    const p = await r.nthProposal(a, 1);
    expect(p.status).toBe('rejected');
    expect(failedChecks(p)).toContain(gate);
    expect(await r.memory(a)).toMatchObject({ version: 1, files: { 'memory/principles.md': '# Principles\n' } });
  });

  it('shrink_needs_compact: shrinking a file by over 70% is refused as an edit, admitted as a compaction', async () => {
    const r = reflectionApi(() => eager);
    const a = uniqueId('a');
    await r.agent(a);
    const long = `# Domain knowledge\n${Array.from({ length: 20 }, (_, i) => `- fact ${i}`).join('\n')}\n`;
    await r.say(a, 'c1', propose([{ file: 'domain-knowledge.md', content: long }]));
    expect(await r.nthProposal(a, 1)).toMatchObject({ status: 'admitted', version: 2 });
    await r.say(a, 'c1', propose([{ file: 'domain-knowledge.md', content: '# Domain knowledge\n- facts 0-19\n' }]));
    const shrunk = await r.nthProposal(a, 2);
    expect(shrunk.status).toBe('rejected');
    expect(failedChecks(shrunk)).toEqual(['shrink_needs_compact']);
    expect((await r.memory(a)).version).toBe(2);
    await r.say(
      a,
      'c1',
      propose([{ file: 'domain-knowledge.md', action: 'compact', content: '# Domain knowledge\n- facts 0-19\n' }]),
    );
    expect(await r.nthProposal(a, 3)).toMatchObject({ status: 'admitted', version: 3 });
  });
});

describe('approval, rollback, poison, cost', () => {
  it('a proposal touching persona.md waits for approval; approve → applied; reject → unchanged', async () => {
    const r = reflectionApi(() => approving);
    const a = uniqueId('a');
    await r.agent(a);
    await r.say(a, 'c1', propose([{ file: 'persona.md', content: PERSONA }]));
    const waiting = await r.nthProposal(a, 1);
    expect(waiting.status).toBe('awaiting_approval');
    expect(waiting.checks.find((c) => c.name === 'human_approval')).toMatchObject({
      passed: false,
      detail: 'waiting for approval of persona.md',
    });
    expect((await r.memory(a)).version).toBe(1);

    const approved = await r.call<{ status: string; version: number }>(
      'POST',
      `/v1/agents/${a}/proposals/${waiting.id}/approve`,
      { note: 'yes' },
    );
    expect(approved).toMatchObject({ status: 200, body: { status: 'admitted', version: 2 } });
    expect(await r.memory(a)).toMatchObject({ version: 2, files: { 'persona.md': PERSONA } });
    const again = await r.call<{ error: { code: string } }>('POST', `/v1/agents/${a}/proposals/${waiting.id}/approve`);
    expect(again.status).toBe(409);

    await r.say(a, 'c2', propose([{ file: 'persona.md', content: '# Persona\n\nYou answer in Klingon.\n' }]));
    const second = await r.nthProposal(a, 2);
    expect(second.status).toBe('awaiting_approval');
    const rejected = await r.call<{ status: string; checks: { name: string; passed: boolean }[] }>(
      'POST',
      `/v1/agents/${a}/proposals/${second.id}/reject`,
      { note: 'no' },
    );
    expect(rejected.body.status).toBe('rejected');
    expect(await r.memory(a)).toMatchObject({ version: 2, files: { 'persona.md': PERSONA } });

    // A proposal whose file changed while it waited (a rollback) is stale: approving it applies nothing.
    await r.say(a, 'c3', propose([{ file: 'persona.md', content: '# Persona\n\nYou answer in German.\n' }]));
    const third = await r.nthProposal(a, 3);
    expect(third.status).toBe('awaiting_approval');
    await r.call('POST', `/v1/agents/${a}/memory/rollback`, { toVersion: 1 });
    const stale = await r.call<{ status: string; checks: { name: string; passed: boolean; detail?: string }[] }>(
      'POST',
      `/v1/agents/${a}/proposals/${third.id}/approve`,
    );
    expect(stale.body.status).toBe('rejected');
    expect(stale.body.checks.find((c) => c.name === 'base_unchanged')).toMatchObject({
      passed: false,
      detail: 'changed since the proposal was made: persona.md',
    });
    expect((await r.memory(a)).version).toBe(3);

    // The reflection workflow's history, through its decisions, replays against the current workflow code.
    const history = await approving.client.workflow.getHandle(reflectionWorkflowId(a)).fetchHistory();
    await expect(
      Worker.runReplayHistory({ workflowBundle: { codePath: inject('workflowBundlePath') } }, history),
    ).resolves.toBeUndefined();
  });

  it('no decision within the approval wait: rejected, nothing applied, and the summaries are not blamed', async () => {
    const r = reflectionApi(() => hasty);
    const a = uniqueId('a');
    await r.agent(a);
    await r.say(a, 'c1', propose([{ file: 'persona.md', content: PERSONA }]));
    const p = await eventually(
      async () => (await r.proposals(a)).find((x) => x.status === 'rejected'),
      30_000,
      'the proposal to expire',
    );
    expect(p.checks.find((c) => c.name === 'human_approval')).toMatchObject({
      passed: false,
      detail: 'rejected: no decision within the approval wait',
    });
    expect((await r.memory(a)).version).toBe(1);
    expect((await r.state(a)).queued).toEqual([]);
  });

  it('rollback from version 3 to 1 gives version 4 with version 1’s content; 2 and 3 stay readable', async () => {
    const r = reflectionApi(() => eager);
    const a = uniqueId('a');
    await r.agent(a);
    const v1 = await r.memory(a);
    await r.say(a, 'c1', propose([{ file: 'user-profile.md', content: '# User profile\n\n- likes tea\n' }]));
    await r.nthProposal(a, 1);
    await r.say(
      a,
      'c1',
      propose([{ file: 'user-profile.md', content: '# User profile\n\n- likes tea\n- lives in Lyon\n' }]),
    );
    expect(await r.nthProposal(a, 2)).toMatchObject({ status: 'admitted', version: 3 });

    const rolled = await r.call<{ version: number; files: Record<string, string>; rollbackOf: number }>(
      'POST',
      `/v1/agents/${a}/memory/rollback`,
      { toVersion: 1 },
    );
    expect(rolled.body).toEqual({ version: 4, files: v1.files, rollbackOf: 1 });
    expect(await r.memory(a)).toEqual({ version: 4, files: v1.files });
    expect(
      (await r.call<{ files: Record<string, string> }>('GET', `/v1/agents/${a}/memory/versions/2`)).body.files[
        'user-profile.md'
      ],
    ).toBe('# User profile\n\n- likes tea\n');
    expect(
      (await r.call<{ files: Record<string, string> }>('GET', `/v1/agents/${a}/memory/versions/3`)).body.files[
        'user-profile.md'
      ],
    ).toBe('# User profile\n\n- likes tea\n- lives in Lyon\n');
    expect((await r.call('POST', `/v1/agents/${a}/memory/rollback`, { toVersion: 9 })).status).toBe(404);
    // Beyond PostgreSQL's integer (found by schemathesis as a 500): bad input, 400.
    expect((await r.call('POST', `/v1/agents/${a}/memory/rollback`, { toVersion: 9_007_199_254_740_990 })).status).toBe(
      400,
    );
    expect((await r.call('GET', `/v1/agents/${a}/memory/versions/9007199254740990`)).status).toBe(400);
  });

  it('three hard-gate failures put the summaries on the poison list', async () => {
    const r = reflectionApi(() => retrying);
    const a = uniqueId('a');
    await r.agent(a);
    await r.say(a, 'c1', propose([{ file: 'constitution.md', content: 'no rules\n' }]));
    const state = await eventuallyState(r, a, (x) => x.poisoned.length > 0);
    expect(state.poisoned).toEqual([expect.objectContaining({ conversationId: 'c1', failures: 3 })]);
    expect(state.queued).toEqual([]);
    expect((await r.proposals(a)).map((p) => p.status)).toEqual(['poisoned', 'rejected', 'rejected']);
    expect((await r.memory(a)).version).toBe(1);
  });

  it('the daily cost ceiling stops a drain: the summary stays queued, nothing is proposed', async () => {
    const r = reflectionApi(() => frugal);
    const a = uniqueId('a');
    await r.agent(a);
    await r.say(a, 'c1', propose([{ file: 'user-profile.md', content: '# User profile\n\n- likes tea\n' }]));
    expect(await r.nthProposal(a, 1)).toMatchObject({ status: 'admitted' });
    await r.say(a, 'c2', propose([{ file: 'user-profile.md', content: '# User profile\n\n- likes coffee\n' }]));
    const stopped = await eventuallyState(r, a, (s) => s.lastDrain?.outcome === 'ceiling_reached');
    expect(stopped.queued.map((q) => q.conversationId)).toEqual(['c2']);
    expect(stopped.spentTodayUsd).toBeGreaterThan(0.000_001);
    expect(await r.proposals(a)).toHaveLength(1);
    expect((await r.memory(a)).version).toBe(2);
  });
});

async function eventuallyState(
  r: ReturnType<typeof reflectionApi>,
  a: string,
  ok: (s: ReflectionView) => boolean,
): Promise<ReflectionView> {
  return eventually(
    async () => {
      const s = await r.state(a);
      return ok(s) ? s : undefined;
    },
    60_000,
    'the reflection state',
  );
}

describe('the gate, the judges and the tiers', () => {
  it('the "worth learning?" gate decides every turn, logged; the judges admit a proposal and veto one', async () => {
    const r = reflectionApi(() => strict);
    const a = uniqueId('a');
    await r.agent(a);
    await r.say(a, 'c1', propose([{ file: 'user-profile.md', content: '# User profile\n\n- likes tea\n' }]));
    const admitted = await r.nthProposal(a, 1);
    expect(admitted).toMatchObject({ status: 'admitted', version: 2 });
    expect(admitted.checks.find((c) => c.name === 'judges')).toMatchObject({ passed: true });
    expect((await r.state(a)).gateLog).toEqual([expect.objectContaining({ conversationId: 'c1', evolve: true })]);

    await r.say(
      a,
      'c2',
      propose([{ file: 'user-profile.md', content: '# User profile\n\n- likes tea\n- /veto this one\n' }]),
    );
    const vetoed = await r.nthProposal(a, 2);
    expect(vetoed.status).toBe('rejected');
    expect(failedChecks(vetoed)).toEqual(['judges']);
    expect((await r.memory(a)).version).toBe(2);
    expect((await r.state(a)).gateLog).toHaveLength(2);
  });

  it('escalate moves one tier up, at most twice; past the last tier the summaries stay queued', async () => {
    const r = reflectionApi(() => eager);
    const a = uniqueId('a');
    await r.agent(a);
    await r.say(a, 'c1', `/propose ${JSON.stringify({ status: 'escalate', reason: 'too hard for me' })}`);
    const state = await eventuallyState(r, a, (s) => s.lastDrain?.outcome === 'escalation_exhausted');
    expect(state.queued.map((q) => q.conversationId)).toEqual(['c1']);
    const { rows } = await eager.pool.query<{ model: string }>(
      `SELECT model FROM reflection_costs WHERE agent_id = $1 AND purpose = 'reflection' ORDER BY call_key`,
      [a],
    );
    expect(rows.map((x) => x.model)).toEqual(['claude-haiku-4-5', 'claude-sonnet-4-5', 'claude-opus-4-1']);
    expect(await r.proposals(a)).toEqual([]);
  });
});
