import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findSecret } from '../domain/secret-scan';
import { queueAnswer, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { failedChecks, propose, reflectionApi } from './support/reflection';
import { author, routineApi } from './support/routines';
import { REQUIRED_SAMPLES, inPieces, type SecretSample } from './support/secret-samples';

// One Keel: reflection drains at 1 queued conversation (only agents that enable reflection have one), and the
// routine sandbox has short limits.
let keel: TestKeel;
beforeAll(async () => {
  keel = await startTestKeel({
    reflection: { drainAtQueued: 1, approvalFiles: [] },
    routines: { smokeLimitMs: 2_000, runLimitMs: 5_000 },
  });
});
afterAll(async () => keel?.stop());

const usage = { inputTokens: 1, outputTokens: 1, cacheReadTokens: 0, cacheWriteTokens: 0 };
const replyWith = (text: string, n: number) => ({
  content: [{ type: 'tool_use' as const, id: `toolu_${n}`, name: 'reply', input: { text } }],
  stopReason: 'tool_use' as const,
  usage,
});
const ruleOf = (s: SecretSample) => findSecret(s.text)?.rule;
const titled = REQUIRED_SAMPLES.map((s) => [s.name, s] as const);

/** Tool code that returns (or sends) the sample, joined at runtime: neither the code nor the prompt holds it. */
const joined = (s: SecretSample) => `${JSON.stringify(inPieces(s.text))}.join('')`;

describe('a secret in each new rule format is blocked end to end with the scripted model', () => {
  it.each(titled)('in a reply: %s — blocked each time, the turn ends reply_blocked naming the rule', async (_n, s) => {
    const a = uniqueId('a');
    const c = uniqueId('c');
    // The guard allows two corrections; the model leaks three times.
    for (const n of [1, 2, 3]) await queueAnswer(keel, a, c, replyWith(s.text, n));
    const res = await keel.post(a, c, { text: 'what is the key?' }, { wait: 30 });
    expect(res.body.status).toBe('error');
    expect(res.body.error?.code).toBe('reply_blocked');
    expect(res.body.error?.message).toBe(
      `reply blocked 3 times: the reply contains what looks like a secret (${ruleOf(s)})`,
    );
    expect(JSON.stringify(res.body)).not.toContain(s.secret);
  });

  it.each(titled)('in a proposal: %s — rejected by no_credentials, the memory unchanged', async (_n, s) => {
    const r = reflectionApi(() => keel);
    const a = uniqueId('a');
    await r.agent(a);
    // The turn that carries the proposal answers "noted": echoing it would put the secret in a reply.
    await queueAnswer(keel, a, 'c1', replyWith('noted', 1));
    await r.say(a, 'c1', propose([{ file: 'domain-knowledge.md', content: `# Domain knowledge\n\n- ${s.text}\n` }]));
    const p = await r.nthProposal(a, 1);
    expect(p.status).toBe('rejected');
    expect(failedChecks(p)).toEqual(['no_credentials']);
    const detail = p.checks.find((x) => x.name === 'no_credentials')?.detail ?? '';
    expect(detail).toContain(`domain-knowledge.md: ${ruleOf(s)}`);
    expect(detail).not.toContain(s.secret);
    expect((await r.memory(a)).version).toBe(1);
  });

  it.each(titled)(
    'in an artifact: %s — the run ends error, withheld, in the artifact and transcript',
    async (_n, s) => {
      const r = routineApi(() => keel);
      const a = uniqueId('a');
      await r.app(a, 'crm', []);
      const tool = { name: 'reportKey', code: `async function reportKey() { return 'the key: ' + ${joined(s)}; }` };
      await r.routine(a, 'crm', 'report', { prompt: `Report the key ${author(tool)}` });
      const run = await r.runNow(a, 'crm', 'report');
      const rule = findSecret(`the key: ${s.text}`)?.rule;
      const withheld = `withheld: the text contains what looks like a secret (${rule})`;
      expect(run).toMatchObject({ status: 'error', digest: withheld });
      const artifact = await r.call<{ content: string }>('GET', `/v1/agents/${a}/apps/crm/artifacts/${run.artifactId}`);
      expect(artifact.body.content).toContain(withheld);
      expect(artifact.body.content).not.toContain(s.secret);
      const transcript = await r.call('GET', `/v1/agents/${a}/apps/crm/routines/report/transcript`);
      expect(JSON.stringify(transcript.body)).not.toContain(s.secret);
    },
  );

  it.each(titled)('in a routine send: %s — refused before any approval is asked; nothing is sent', async (_n, s) => {
    const r = routineApi(() => keel);
    const a = uniqueId('a');
    await r.app(a, 'crm', []);
    const tool = { name: 'sendKey', code: `async function sendKey() { await send(${joined(s)}); return 'sent'; }` };
    await r.routine(a, 'crm', 'notify', { prompt: `Send the key ${author(tool)}` });
    const run = await r.runNow(a, 'crm', 'notify');
    expect(run.status).toBe('error');
    expect(run.digest).toBe(
      `send refused: the text contains what looks like a secret (${ruleOf(s)}); nothing was sent`,
    );
    expect(run.gate).toBeUndefined();
    const runs = await r.runs(a, 'crm', 'notify');
    expect(runs.map((x) => x.status)).toEqual(['error']);
  });
});
