import { describe, expect, it } from 'vitest';
import { judgesCheck } from '../../domain/admission';
import type { ModelMessage } from '../../domain/model';
import {
  DEFAULT_REFLECTION_SETTINGS,
  GATE_SYSTEM,
  JUDGE_SYSTEM,
  REFLECTION,
  REFLECTION_SYSTEM,
  costUsd,
  enqueue,
  gateMessage,
  isUserConversation,
  parseGate,
  parseProposal,
  reflectionMessage,
  scriptedReflectionAnswer,
  type QueuedSummary,
  type TurnSummary,
} from '../../domain/reflection';

const summary = (conversationId: string, toSeq: number): TurnSummary => ({
  conversationId,
  fromSeq: toSeq - 1,
  toSeq,
  outcome: 'replied',
  errorReplies: 0,
  turnId: `t${toSeq}`,
});

describe('which conversations reflection learns from', () => {
  it.each(['slack:C123:alice', 'web:42', 'schedule-notes', 'my-routine:x'])('%s is a user conversation', (id) => {
    expect(isUserConversation(id)).toBe(true);
  });

  it.each(['sched:job-1', 'routine:weekly-summary'])('%s is not', (id) => {
    expect(isUserConversation(id)).toBe(false);
  });
});

describe('the reflection queue', () => {
  it('appends summaries of new conversations with no failures', () => {
    const q = enqueue(enqueue([], summary('a', 2)), summary('b', 4));
    expect(q).toEqual([
      { ...summary('a', 2), failures: 0 },
      { ...summary('b', 4), failures: 0 },
    ]);
  });

  it('the latest summary of a conversation wins, keeps the earlier failures, reaches back to its first message', () => {
    const queue: QueuedSummary[] = [
      { ...summary('a', 2), failures: 2 },
      { ...summary('b', 4), failures: 1 },
    ];
    const q = enqueue(queue, summary('a', 6));
    expect(q).toHaveLength(2);
    expect(q.find((s) => s.conversationId === 'a')).toEqual({
      ...summary('a', 6),
      fromSeq: summary('a', 2).fromSeq,
      failures: 2,
    });
    expect(q.find((s) => s.conversationId === 'b')).toEqual({ ...summary('b', 4), failures: 1 });
  });

  it('does not change the queue it is given', () => {
    const queue: QueuedSummary[] = [{ ...summary('a', 2), failures: 1 }];
    enqueue(queue, summary('a', 3));
    expect(queue).toEqual([{ ...summary('a', 2), failures: 1 }]);
  });
});

describe('parseProposal', () => {
  const ok = {
    status: 'ok',
    edits: [{ file: 'user-profile.md', action: 'edit', content: '# User profile\n\n- Likes tea.\n' }],
  };

  it('reads a proposal and fills the defaults of an edit', () => {
    expect(parseProposal(JSON.stringify(ok))).toEqual({
      ok: true,
      proposal: {
        status: 'ok',
        edits: [
          {
            file: 'user-profile.md',
            action: 'edit',
            content: '# User profile\n\n- Likes tea.\n',
            summary: '',
            rationale: '',
            conversationIds: [],
          },
        ],
      },
    });
  });

  it('reads skip and escalate', () => {
    expect(parseProposal('{"status":"skip","reason":"small talk"}')).toEqual({
      ok: true,
      proposal: { status: 'skip', reason: 'small talk' },
    });
    expect(parseProposal('{"status":"escalate"}')).toEqual({ ok: true, proposal: { status: 'escalate', reason: '' } });
  });

  it('takes the last JSON object of the reply, after prose and earlier objects', () => {
    const reply =
      'First I thought {"status":"skip","reason":"nothing"} but then:\n' +
      `${JSON.stringify(ok, null, 2)}\nThat is all {see above}.`;
    const r = parseProposal(reply);
    expect(r.ok && r.proposal.status).toBe('ok');
  });

  it('takes the last object even when an earlier one is a proposal too', () => {
    const r = parseProposal(`${JSON.stringify(ok)}\n{"status":"skip","reason":"changed my mind"}`);
    expect(r).toEqual({ ok: true, proposal: { status: 'skip', reason: 'changed my mind' } });
  });

  it('keeps braces inside strings of the proposal', () => {
    const withBraces = {
      status: 'ok',
      edits: [{ file: 'strategies/code.md', action: 'new', content: '# Code\n\n- Write `{ a: 1 }` objects}.\n' }],
    };
    const r = parseProposal(`Here: ${JSON.stringify(withBraces)}`);
    expect(r.ok && r.proposal.status === 'ok' && r.proposal.edits[0]?.content).toBe(
      '# Code\n\n- Write `{ a: 1 }` objects}.\n',
    );
  });

  it.each([
    ['no JSON', 'I would rather not change anything.'],
    ['broken JSON', '{"status":"ok","edits":[{"file":"persona.md"'],
    ['an empty answer', ''],
  ])('%s is an error, never ok', (_what, reply) => {
    expect(parseProposal(reply)).toEqual({ ok: false, error: 'the answer holds no JSON proposal' });
  });

  it.each([
    ['an unknown status', '{"status":"maybe"}'],
    ['ok without edits', '{"status":"ok"}'],
    ['ok with no edit', '{"status":"ok","edits":[]}'],
    ['an unknown action', '{"status":"ok","edits":[{"file":"persona.md","action":"rename"}]}'],
    ['an edit without a file', '{"status":"ok","edits":[{"file":"","action":"edit"}]}'],
    ['a last object that is not a proposal', `${JSON.stringify(ok)} {"confidence":1}`],
  ])('%s is an error', (_what, reply) => {
    const r = parseProposal(reply);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).not.toBe('');
  });
});

describe('the gate', () => {
  it('says no only on a clear evolve:false', () => {
    expect(parseGate('{"evolve": false, "reason": "small talk"}')).toEqual({ evolve: false, reason: 'small talk' });
    expect(parseGate('Decision: {"evolve":false}')).toEqual({ evolve: false, reason: '' });
  });

  it.each([
    ['evolve:true', '{"evolve": true, "reason": "a correction"}'],
    ['a string "false"', '{"evolve": "false"}'],
    ['evolve missing', '{"reason": "unsure"}'],
    ['evolve 0', '{"evolve": 0}'],
  ])('says yes on %s', (_what, reply) => {
    expect(parseGate(reply).evolve).toBe(true);
  });

  it.each(['no', '', 'evolve: false', '{"evolve": false'])('says yes when the answer does not parse (%j)', (reply) => {
    expect(parseGate(reply)).toEqual({ evolve: true, reason: 'the gate answer did not parse' });
  });

  it('cuts the messages it shows the gate', () => {
    const m = gateMessage({
      turns: 3,
      outcome: 'error',
      errorReplies: 1,
      firstUser: 'f'.repeat(1000),
      lastUser: 'u'.repeat(1000),
      lastReply: 'r'.repeat(1000),
    });
    expect(m).toContain('Turns: 3; outcome: error; error replies: 1');
    expect(m).toContain(`First user message: ${'f'.repeat(REFLECTION.gateFirstUserChars)}\n`);
    expect(m).not.toContain('f'.repeat(REFLECTION.gateFirstUserChars + 1));
    expect(m).toContain(`Last user message: ${'u'.repeat(REFLECTION.gateFirstUserChars)}\n`);
    expect(m).not.toContain('u'.repeat(REFLECTION.gateFirstUserChars + 1));
    expect(m).toMatch(new RegExp(`Last reply: r{${REFLECTION.gateLastReplyChars}}$`));
  });
});

describe('costUsd', () => {
  const usage = { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 };

  it('uses prices per million tokens', () => {
    expect(costUsd({ ...usage, inputTokens: 1_000_000 }, { input: 3, output: 15 })).toBeCloseTo(3);
    expect(costUsd({ ...usage, outputTokens: 1_000_000 }, { input: 3, output: 15 })).toBeCloseTo(15);
    expect(costUsd({ ...usage, inputTokens: 2_000, outputTokens: 1_000 }, { input: 3, output: 15 })).toBeCloseTo(0.021);
    expect(costUsd(usage, { input: 3, output: 15 })).toBe(0);
  });

  it('does not count cached tokens as free', () => {
    expect(
      costUsd({ ...usage, cacheReadTokens: 500_000, cacheWriteTokens: 500_000 }, { input: 3, output: 15 }),
    ).toBeGreaterThan(0);
  });
});

describe('the scripted model reflecting', () => {
  const asUser = (text: string): ModelMessage[] => [{ role: 'user', content: [{ type: 'text', text }] }];
  const proposalJson = JSON.stringify({
    status: 'ok',
    edits: [{ file: 'user-profile.md', action: 'edit', content: '# User profile\n\n- Likes tea.\n' }],
  });
  const files = { 'user-profile.md': '# User profile\n' };

  it('the gate always says yes', () => {
    expect(parseGate(scriptedReflectionAnswer(GATE_SYSTEM, asUser('Turns: 1; outcome: replied')) ?? '').evolve).toBe(
      true,
    );
  });

  it('a judge fails with confidence 0.9 a proposal holding /veto, which vetoes', () => {
    const veto = JSON.parse(scriptedReflectionAnswer(JUDGE_SYSTEM, asUser('edit: - remember /veto this')) ?? '') as {
      pass: boolean;
      confidence: number;
    };
    expect(veto).toMatchObject({ pass: false, confidence: 0.9 });
    expect(judgesCheck([{ ok: true, ...veto, reason: 'x' }]).passed).toBe(false);
    const fine = JSON.parse(scriptedReflectionAnswer(JUDGE_SYSTEM, asUser('edit: - likes tea')) ?? '') as {
      pass: boolean;
    };
    expect(fine.pass).toBe(true);
  });

  it('reflection proposes the JSON after /propose in the newest user line', () => {
    const message = reflectionMessage(files, [
      {
        conversationId: 'c1',
        messages: [
          { role: 'user', text: '/propose {"status":"skip","reason":"old"}' },
          { role: 'assistant', text: 'noted' },
        ],
      },
      {
        conversationId: 'c2',
        messages: [
          { role: 'user', text: `please /propose ${proposalJson}` },
          { role: 'assistant', text: '/propose {"status":"escalate"}' },
        ],
      },
    ]);
    const answer = scriptedReflectionAnswer(REFLECTION_SYSTEM, asUser(message));
    expect(answer).toBe(proposalJson);
    expect(parseProposal(answer ?? '')).toMatchObject({ ok: true, proposal: { status: 'ok' } });
  });

  it('reflection skips when no user line holds /propose', () => {
    const message = reflectionMessage(files, [
      {
        conversationId: 'c1',
        messages: [
          { role: 'user', text: 'hello' },
          { role: 'assistant', text: `/propose ${proposalJson}` },
        ],
      },
    ]);
    const answer = scriptedReflectionAnswer(REFLECTION_SYSTEM, asUser(message));
    expect(parseProposal(answer ?? '')).toMatchObject({ ok: true, proposal: { status: 'skip' } });
  });

  it('answers nothing to other system prompts', () => {
    expect(scriptedReflectionAnswer('You are a helpful agent.', asUser(`/propose ${proposalJson}`))).toBeUndefined();
  });
});

describe('what the model is asked', () => {
  it('reflection sees every memory file and every conversation, by role', () => {
    const m = reflectionMessage({ 'persona.md': '# Persona\nTerse.', 'strategies/x.md': '# X' }, [
      {
        conversationId: 'slack:C1',
        messages: [
          { role: 'user', text: 'call me Al' },
          { role: 'assistant', text: 'ok Al' },
        ],
      },
    ]);
    expect(m).toContain('--- persona.md\n# Persona\nTerse.');
    expect(m).toContain('--- strategies/x.md\n# X');
    expect(m).toContain('=== conversation slack:C1\nuser: call me Al\nassistant: ok Al');
  });

  it('the reflection prompt keeps constitution.md off the writable list', () => {
    const writable = REFLECTION_SYSTEM.split('\n').find((l) => l.startsWith('Writable:'));
    expect(writable).toBeDefined();
    expect(writable).not.toContain('constitution.md');
  });
});

describe('default settings', () => {
  it('drain every 3 hours or at 5 queued, no gate, no judges, persona edits wait for approval', () => {
    expect(DEFAULT_REFLECTION_SETTINGS).toMatchObject({
      drainEveryMs: 3 * 3_600_000,
      drainAtQueued: 5,
      gate: false,
      judges: 0,
      approvalFiles: ['persona.md'],
    });
    expect(DEFAULT_REFLECTION_SETTINGS.tiers).toHaveLength(3);
  });
});
