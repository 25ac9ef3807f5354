import { describe, expect, it } from 'vitest';
import { delegateSystemPrompt, retriggerText, taskMessage, type AdmittedResult } from '../../domain/delegation';
import type { ContentBlock, ModelMessage } from '../../domain/model';
import { scriptedDelegatePlan, scriptedPlan, type ScriptedPlan } from '../../domain/scripted-model';
import { toModelMessages, type TranscriptMessage } from '../../domain/transcript';
import { onlyToolUse, respond } from './scripted-plans';

/** The delegate's system prompt for a task, as the delegate workflow builds it. */
const systemFor = (title: string, description = '', extra: Partial<Parameters<typeof delegateSystemPrompt>[0]> = {}) =>
  delegateSystemPrompt({ task: taskMessage(title, description), requiredSkills: [], skillIndex: [], ...extra });

const user = (...content: ContentBlock[]): ModelMessage => ({ role: 'user', content });
const assistant = (...content: ContentBlock[]): ModelMessage => ({ role: 'assistant', content });
const text = (t: string): ContentBlock => ({ type: 'text', text: t });
const taskOpening = (title: string, description = ''): ModelMessage[] => [user(text(taskMessage(title, description)))];

/** The set_status call of a plan: its kind, text and any other fields. */
function statusOf(plan: ScriptedPlan): Record<string, unknown> {
  const b = onlyToolUse(plan);
  expect(b.name).toBe('set_status');
  return b.input;
}

describe('scriptedDelegatePlan: a plain task', () => {
  it('sets the outcome "done: <title>" at once', () => {
    const plan = scriptedDelegatePlan(systemFor('Summarise the notes'), taskOpening('Summarise the notes'), 1);
    expect(statusOf(plan)).toEqual({ kind: 'outcome', text: 'done: Summarise the notes' });
    expect(respond(plan).delayMs).toBe(0);
  });

  it('names the tool call after the call index', () => {
    expect(onlyToolUse(scriptedDelegatePlan(systemFor('t'), [], 3)).id).toBe('toolu_delegate_3');
  });

  it('ignores a plain description', () => {
    expect(statusOf(scriptedDelegatePlan(systemFor('Title here', 'some words\nmore words'), [], 1))).toEqual({
      kind: 'outcome',
      text: 'done: Title here',
    });
  });

  it('reads the task from the system prompt even when messages is empty', () => {
    expect(statusOf(scriptedDelegatePlan(systemFor('From the prompt'), [], 1))).toEqual({
      kind: 'outcome',
      text: 'done: From the prompt',
    });
  });

  it('reads the task from the system prompt, not from the messages', () => {
    const plan = scriptedDelegatePlan(systemFor('Prompt title'), taskOpening('/error 1 from messages'), 1);
    expect(statusOf(plan)).toEqual({ kind: 'outcome', text: 'done: Prompt title' });
  });

  it('does not take a command from a skill section after the task', () => {
    const system = systemFor('Plain title', '', {
      skillIndex: ['alpha'],
      requiredSkills: [{ name: 'beta', body: '/error 1 from the skill body' }],
    });
    expect(system).toContain('/error 1 from the skill body');
    expect(statusOf(scriptedDelegatePlan(system, [], 1))).toEqual({ kind: 'outcome', text: 'done: Plain title' });
  });

  it('treats an unknown command as a plain task', () => {
    expect(statusOf(scriptedDelegatePlan(systemFor('/dance now'), [], 1))).toEqual({
      kind: 'outcome',
      text: 'done: /dance now',
    });
  });
});

describe('scriptedDelegatePlan: /delay', () => {
  it('makes one slow call, then sets the outcome', () => {
    const plan = scriptedDelegatePlan(systemFor('/delay 1500 slow thing'), [], 1);
    expect(respond(plan).delayMs).toBe(1500);
    expect(statusOf(plan)).toEqual({ kind: 'outcome', text: 'done: slow thing' });
  });

  it('clamps the delay to 0…600000 ms', () => {
    expect(respond(scriptedDelegatePlan(systemFor('/delay 99999999 x'), [], 1)).delayMs).toBe(600_000);
    expect(respond(scriptedDelegatePlan(systemFor('/delay nope x'), [], 1)).delayMs).toBe(0);
  });
});

describe('scriptedDelegatePlan: /work', () => {
  const system = systemFor('/work 3 25 build the thing');

  it.each([
    [1, 'progress', 'step 1 of 3'],
    [2, 'progress', 'step 2 of 3'],
    [3, 'outcome', 'done: build the thing'],
    [4, 'outcome', 'done: build the thing'],
  ] as const)('call %i → %s "%s", each taking the given ms', (callIndex, kind, t) => {
    const plan = scriptedDelegatePlan(system, [], callIndex);
    expect(statusOf(plan)).toEqual({ kind, text: t });
    expect(respond(plan).delayMs).toBe(25);
  });

  it('with one step sets the outcome on the first call', () => {
    expect(statusOf(scriptedDelegatePlan(systemFor('/work 1 0 quick'), [], 1))).toEqual({
      kind: 'outcome',
      text: 'done: quick',
    });
  });

  it('counts calls across segments (call 20 of 30 is still progress)', () => {
    expect(statusOf(scriptedDelegatePlan(systemFor('/work 30 0 long'), [], 20))).toEqual({
      kind: 'progress',
      text: 'step 20 of 30',
    });
  });
});

describe('scriptedDelegatePlan: /fail and /error', () => {
  it('/fail fails the first n attempts retryably, then sets the outcome', () => {
    const plan = scriptedDelegatePlan(systemFor('/fail 2 flaky'), [], 1);
    if (plan.kind !== 'fail') throw new Error(`expected a fail plan, got ${plan.kind}`);
    expect(plan.attemptsToFail).toBe(2);
    expect(statusOf(plan.then)).toEqual({ kind: 'outcome', text: 'done: flaky' });
  });

  it('/error fails the model call for good', () => {
    const plan = scriptedDelegatePlan(systemFor('/error 1 broken'), [], 1);
    expect(plan).toEqual({ kind: 'error', message: 'scripted delegate error: 1 broken' });
  });

  it('/error fails on every call, not only the first', () => {
    expect(scriptedDelegatePlan(systemFor('/error 1 broken'), [], 5).kind).toBe('error');
  });
});

describe('scriptedDelegatePlan: /noop, /loop, /blocked', () => {
  it('/noop answers text and no tool call', () => {
    const plan = respond(scriptedDelegatePlan(systemFor('/noop idle'), [], 1));
    expect(plan.content).toEqual([{ type: 'text', text: 'still thinking about idle' }]);
  });

  it('/noop keeps answering text when nudged', () => {
    const messages = [
      ...taskOpening('/noop idle'),
      assistant(text('still thinking about idle')),
      user(text('[note] You answered without setting an outcome.')),
    ];
    const plan = respond(scriptedDelegatePlan(systemFor('/noop idle'), messages, 2));
    expect(plan.content.every((b) => b.type === 'text')).toBe(true);
  });

  it.each([1, 2, 15, 150])('/loop reports progress "still going (call %i)"', (callIndex) => {
    expect(statusOf(scriptedDelegatePlan(systemFor('/loop'), [], callIndex))).toEqual({
      kind: 'progress',
      text: `still going (call ${callIndex})`,
    });
  });

  it('/blocked sets the outcome with the blocked field', () => {
    expect(statusOf(scriptedDelegatePlan(systemFor('/blocked login wall at https://example.test'), [], 1))).toEqual({
      kind: 'outcome',
      text: 'blocked',
      blocked: 'login wall at https://example.test',
    });
  });

  it('/blocked without a reason still carries one', () => {
    expect(statusOf(scriptedDelegatePlan(systemFor('/blocked'), [], 1))).toMatchObject({
      kind: 'outcome',
      blocked: 'blocked',
    });
  });
});

describe('scriptedDelegatePlan: /skill', () => {
  const system = systemFor('/skill house-style', '', { skillIndex: ['house-style'] });

  it('reads the skill on the first call', () => {
    const b = onlyToolUse(scriptedDelegatePlan(system, taskOpening('/skill house-style'), 1));
    expect(b).toEqual({ type: 'tool_use', id: 'toolu_delegate_1', name: 'read_skill', input: { name: 'house-style' } });
  });

  it('then sets the outcome from the first line of the tool result in the last message', () => {
    const messages: ModelMessage[] = [
      ...taskOpening('/skill house-style'),
      assistant({ type: 'tool_use', id: 'toolu_delegate_1', name: 'read_skill', input: { name: 'house-style' } }),
      user({
        type: 'tool_result',
        tool_use_id: 'toolu_delegate_1',
        content: 'Write in short sentences.\nUse British spelling.',
      }),
    ];
    expect(statusOf(scriptedDelegatePlan(system, messages, 2))).toEqual({
      kind: 'outcome',
      text: 'skill house-style: Write in short sentences.',
    });
  });

  it('sets an outcome with an empty line when no tool result came back', () => {
    expect(statusOf(scriptedDelegatePlan(system, [], 2))).toEqual({ kind: 'outcome', text: 'skill house-style: ' });
  });
});

describe('scriptedDelegatePlan: where the command sits', () => {
  it.each([
    ['on the title line', '/work 2 5 go', ''],
    ['in the description', 'Do the work', '/work 2 5 go'],
    ['in the description, after other lines', 'Do the work', 'First some context.\n  /work 2 5 go\nand after'],
  ])('finds it %s', (_where, title, description) => {
    const system = systemFor(title, description);
    expect(statusOf(scriptedDelegatePlan(system, [], 1))).toEqual({ kind: 'progress', text: 'step 1 of 2' });
    expect(statusOf(scriptedDelegatePlan(system, [], 2))).toEqual({ kind: 'outcome', text: 'done: go' });
  });

  it('takes the first command line when the description has two', () => {
    expect(scriptedDelegatePlan(systemFor('t', '/blocked first\n/error 1 second'), [], 1).kind).toBe('respond');
  });

  it('a command in the description still leaves the title as the plain outcome for unknown verbs', () => {
    expect(statusOf(scriptedDelegatePlan(systemFor('Real title', '/unknown thing'), [], 1))).toEqual({
      kind: 'outcome',
      text: 'done: Real title',
    });
  });
});

// ---- scriptedPlan: the retrigger relay ------------------------------------------------------------------------------

function replyText(plan: ScriptedPlan): string {
  const b = onlyToolUse(plan);
  expect(b.name).toBe('reply');
  if (typeof b.input.text !== 'string') throw new Error('reply without text');
  return b.input.text;
}

const note = (results: AdmittedResult[]) => text(`[note] ${retriggerText(results)}`);
const earlierTurn: ModelMessage[] = [
  user(text('please look into it')),
  assistant({ type: 'tool_use', id: 'r1', name: 'reply', input: { text: 'on it' } }),
  user({ type: 'tool_result', tool_use_id: 'r1', content: 'sent' }),
];

describe('scriptedPlan: the retrigger relay', () => {
  it('relays one result as "relay: <id> <kind>: <first line>"', () => {
    // A tool result and the note merged into one user message, as toModelMessages merges consecutive rows.
    const last = user(
      { type: 'tool_result', tool_use_id: 'r1', content: 'sent' },
      note([{ delegateId: 'd-1', kind: 'success', result: 'done: the report\nmore detail' }]),
    );
    const plan = scriptedPlan([...earlierTurn.slice(0, 2), last], 4);
    expect(replyText(plan)).toBe('relay: d-1 success: done: the report');
  });

  it('relays several results in order, joined by " | ", with each kind', () => {
    const results: AdmittedResult[] = [
      { delegateId: 'd-1', kind: 'success', result: 'done: one' },
      { delegateId: 'd-2', kind: 'failed', result: 'Delegate failed: boom\nstack' },
      {
        delegateId: 'd-3',
        kind: 'timeout',
        result: 'Delegate exceeded its 60s wall-clock timeout before producing any result',
      },
      { delegateId: 'd-4', kind: 'cancelled', result: 'Delegate cancelled: user asked' },
    ];
    const plan = scriptedPlan([...earlierTurn, user(note(results))], 5);
    expect(replyText(plan)).toBe(
      'relay: d-1 success: done: one | d-2 failed: Delegate failed: boom | ' +
        'd-3 timeout: Delegate exceeded its 60s wall-clock timeout before producing any result | ' +
        'd-4 cancelled: Delegate cancelled: user asked',
    );
  });

  it('relays a retrigger that arrives as a system row of the transcript', () => {
    const rows: TranscriptMessage[] = [
      { seq: 1, role: 'user', content: [text('start a task')] },
      { seq: 2, role: 'assistant', content: [{ type: 'tool_use', id: 'c1', name: 'delegate', input: {} }] },
      { seq: 3, role: 'tool', content: [{ type: 'tool_result', tool_use_id: 'c1', content: 'delegate d-9 started' }] },
      {
        seq: 4,
        role: 'system',
        content: [text(retriggerText([{ delegateId: 'd-9', kind: 'partial', result: 'half of it' }]))],
      },
    ];
    expect(replyText(scriptedPlan(toModelMessages(rows), 2))).toBe('relay: d-9 partial: half of it');
  });

  it('takes the last text block of the last user message as the note', () => {
    const plan = scriptedPlan(
      [user(text('hello'), note([{ delegateId: 'x', kind: 'blocked', result: 'Delegate blocked: captcha' }]))],
      1,
    );
    expect(replyText(plan)).toBe('relay: x blocked: Delegate blocked: captcha');
  });

  it('does not relay when the user spoke after the note', () => {
    const plan = scriptedPlan(
      [...earlierTurn, user(note([{ delegateId: 'x', kind: 'success', result: 'r' }]), text('what happened?'))],
      5,
    );
    expect(replyText(plan)).toBe('echo: what happened?');
  });

  it('does not relay an older retrigger once the user has spoken again', () => {
    const plan = scriptedPlan(
      [
        user(text('hi')),
        assistant(text('hello')),
        user(note([{ delegateId: 'x', kind: 'success', result: 'r' }])),
        assistant(text('relayed')),
        user(text('thanks')),
      ],
      3,
    );
    expect(replyText(plan)).toBe('echo: thanks');
  });
});
