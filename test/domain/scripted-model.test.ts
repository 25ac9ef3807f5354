import { describe, expect, it } from 'vitest';
import type { ContentBlock, ModelMessage } from '../../domain/model';
import { checkReply } from '../../domain/reply-guard';
import { FAKE_SECRET, scriptedPlan, type ScriptedPlan } from '../../domain/scripted-model';
import { onlyToolUse, respond } from './scripted-plans';

const user = (...texts: string[]): ModelMessage => ({
  role: 'user',
  content: texts.map((text) => ({ type: 'text', text })),
});
const userBlocks = (...content: ContentBlock[]): ModelMessage => ({ role: 'user', content });
const assistant = (...content: ContentBlock[]): ModelMessage => ({ role: 'assistant', content });
const toolResult = (toolUseId: string, content: string, isError = false): ContentBlock =>
  isError
    ? { type: 'tool_result', tool_use_id: toolUseId, content, is_error: true }
    : { type: 'tool_result', tool_use_id: toolUseId, content };
const text = (t: string): ContentBlock => ({ type: 'text', text: t });

/** The text of a plan that replies through the reply tool. */
function replyText(plan: ScriptedPlan): string {
  const block = onlyToolUse(plan);
  expect(block.name).toBe('reply');
  const t = block.input.text;
  if (typeof t !== 'string') throw new Error('reply without text');
  return t;
}

describe('scripted model: plain text', () => {
  it('echoes plain text through the reply tool, immediately', () => {
    const plan = scriptedPlan([user('hello there')], 1);
    expect(replyText(plan)).toBe('echo: hello there');
    expect(respond(plan).delayMs).toBe(0);
  });

  it('answers the latest user text, not an earlier one', () => {
    const messages = [
      user('first'),
      assistant({ type: 'tool_use', id: 't1', name: 'reply', input: { text: 'echo: first' } }),
      userBlocks(toolResult('t1', 'sent')),
      user('second'),
    ];
    expect(replyText(scriptedPlan(messages, 1))).toBe('echo: second');
  });

  it('takes the last text block of a merged user message as the command', () => {
    expect(replyText(scriptedPlan([user('one', 'two')], 1))).toBe('echo: two');
  });

  it('treats an unknown slash command as plain text', () => {
    expect(replyText(scriptedPlan([user('/dance now')], 1))).toBe('echo: /dance now');
  });
});

describe('scripted model: /text', () => {
  it('answers with plain assistant text and no tool call', () => {
    const plan = respond(scriptedPlan([user('/text hello world')], 1));
    expect(plan.content).toEqual([{ type: 'text', text: 'echo: hello world' }]);
    expect(plan.delayMs).toBe(0);
  });

  it('keeps the rest of a multi-line text', () => {
    const plan = respond(scriptedPlan([user('/text line one\nline two')], 1));
    expect(plan.content).toEqual([{ type: 'text', text: 'echo: line one\nline two' }]);
  });
});

describe('scripted model: /delay', () => {
  it('replies after the given number of milliseconds', () => {
    const plan = scriptedPlan([user('/delay 1500 slow answer')], 1);
    expect(respond(plan).delayMs).toBe(1500);
    expect(replyText(plan)).toBe('echo: slow answer');
  });

  it('clamps the delay to 0…600000 ms and treats a non-number as 0', () => {
    expect(respond(scriptedPlan([user('/delay 99999999 x')], 1)).delayMs).toBe(600_000);
    expect(respond(scriptedPlan([user('/delay -5 x')], 1)).delayMs).toBe(0);
    expect(respond(scriptedPlan([user('/delay soon x')], 1)).delayMs).toBe(0);
  });
});

describe('scripted model: /fail', () => {
  it('fails the first n attempts retryably, then replies', () => {
    const plan = scriptedPlan([user('/fail 2 finally')], 1);
    expect(plan.kind).toBe('fail');
    if (plan.kind !== 'fail') return;
    expect(plan.attemptsToFail).toBe(2);
    expect(replyText(plan.then)).toBe('echo: finally');
  });

  it('clamps the number of failures to at most 100', () => {
    const plan = scriptedPlan([user('/fail 5000 x')], 1);
    expect(plan.kind === 'fail' && plan.attemptsToFail).toBe(100);
  });
});

describe('scripted model: /error', () => {
  it('ends the first turn carrying the text in an error', () => {
    const plan = scriptedPlan([user('/error 1 boom')], 1);
    expect(plan.kind).toBe('error');
    expect(plan.kind === 'error' && plan.message).toContain('boom');
  });

  it('counts the turns carrying the same text across the transcript', () => {
    const cmd = '/error 2 boom';
    const note = '[note] turn failed: model_error: scripted turn error (1 of 2) for "boom"';
    const second = [user(cmd), user(note), user(cmd)];
    expect(scriptedPlan(second, 1).kind).toBe('error');
    const third = [user(cmd), user(note), user(cmd), user(note), user(cmd)];
    expect(replyText(scriptedPlan(third, 1))).toBe('echo: boom');
  });

  it('counts text blocks, not messages: consecutive user rows merged into one message count twice', () => {
    // Two submissions of the same text, merged into one user message by the transcript.
    expect(replyText(scriptedPlan([user('/error 1 boom', '/error 1 boom')], 1))).toBe('echo: boom');
    expect(scriptedPlan([user('/error 2 boom', '/error 2 boom')], 1).kind).toBe('error');
  });

  it('does not count other texts, nor assistant messages', () => {
    const messages = [user('/error 1 boom', 'something else'), assistant(text('/error 1 boom')), user('/error 1 boom')];
    expect(replyText(scriptedPlan(messages, 1))).toBe('echo: boom');
    const only = [user('/error 1 boom'), assistant(text('/error 1 boom')), user('hello /error 1 boom')];
    // The latest text is not the command here; it is echoed.
    expect(replyText(scriptedPlan(only, 1))).toBe('echo: hello /error 1 boom');
  });

  it('with n = 0 never errors', () => {
    expect(replyText(scriptedPlan([user('/error 0 fine')], 1))).toBe('echo: fine');
  });
});

describe('scripted model: /tool', () => {
  it('calls the named tool with the JSON arguments first', () => {
    const call = onlyToolUse(scriptedPlan([user('/tool lookup {"city":"Paris","days":3}')], 1));
    expect(call.name).toBe('lookup');
    expect(call.input).toEqual({ city: 'Paris', days: 3 });
  });

  it('calls the tool with an empty input when no JSON is given', () => {
    const call = onlyToolUse(scriptedPlan([user('/tool ping')], 1));
    expect(call.name).toBe('ping');
    expect(call.input).toEqual({});
  });

  it('on the next step, replies with what the tool answered', () => {
    const first = onlyToolUse(scriptedPlan([user('/tool lookup {"city":"Paris"}')], 1));
    const messages = [
      user('/tool lookup {"city":"Paris"}'),
      assistant(first),
      userBlocks(toolResult(first.id, 'sunny, 21°C')),
    ];
    const second = scriptedPlan(messages, 2);
    expect(replyText(second)).toBe('tool result: sunny, 21°C');
    expect(onlyToolUse(second).id).not.toBe(first.id);
  });

  it('replies with the tool error when the tool failed', () => {
    const messages = [
      user('/tool lookup {}'),
      assistant({ type: 'tool_use', id: 'x', name: 'lookup', input: {} }),
      userBlocks(toolResult('x', 'no such city', true)),
    ];
    expect(replyText(scriptedPlan(messages, 2))).toBe('tool error: no such city');
  });

  it('uses the latest tool result of the turn', () => {
    const messages = [
      user('/tool lookup {}'),
      assistant({ type: 'tool_use', id: 'a', name: 'lookup', input: {} }),
      userBlocks(toolResult('a', 'first answer')),
      assistant({ type: 'tool_use', id: 'b', name: 'lookup', input: {} }),
      userBlocks(toolResult('b', 'second answer')),
    ];
    expect(replyText(scriptedPlan(messages, 3))).toBe('tool result: second answer');
  });

  it('ignores tool results from before the command', () => {
    const messages = [
      user('/tool a {}'),
      assistant({ type: 'tool_use', id: 'a', name: 'a', input: {} }),
      userBlocks(toolResult('a', 'old answer'), text('/tool b {"n":1}')),
    ];
    const call = onlyToolUse(scriptedPlan(messages, 1));
    expect(call.name).toBe('b');
    expect(call.input).toEqual({ n: 1 });
  });

  it('replies that it could not parse bad JSON, without calling the tool', () => {
    const plan = scriptedPlan([user('/tool lookup {city: Paris')], 1);
    expect(replyText(plan)).toBe('echo: could not parse the arguments of /tool lookup');
  });

  it('calls the tool with an empty input when the JSON is not an object', () => {
    expect(onlyToolUse(scriptedPlan([user('/tool lookup [1,2]')], 1)).input).toEqual({});
    expect(onlyToolUse(scriptedPlan([user('/tool lookup 42')], 1)).input).toEqual({});
  });
});

describe('scripted model: /skip', () => {
  it('calls the skip tool', () => {
    const call = onlyToolUse(scriptedPlan([user('/skip')], 1));
    expect(call.name).toBe('skip');
    expect(typeof call.input.reason).toBe('string');
  });
});

describe('scripted model: /leak', () => {
  it('replies with the fake secret, which the reply guard blocks', () => {
    const t = replyText(scriptedPlan([user('/leak')], 1));
    expect(t).toContain(FAKE_SECRET);
    const verdict = checkReply(t);
    expect(verdict.ok).toBe(false);
    expect(!verdict.ok && verdict.detail).toContain('anthropic_key');
  });

  it('tries again with the same secret after the guard turned it into a tool error', () => {
    const first = onlyToolUse(scriptedPlan([user('/leak')], 1));
    const messages = [
      user('/leak'),
      assistant(first),
      userBlocks(toolResult(first.id, 'Reply blocked by the reply guard', true)),
    ];
    const second = scriptedPlan(messages, 2);
    expect(replyText(second)).toContain(FAKE_SECRET);
    const third = scriptedPlan(
      [
        ...messages,
        assistant(onlyToolUse(second)),
        userBlocks(toolResult(onlyToolUse(second).id, 'blocked again', true)),
      ],
      3,
    );
    expect(replyText(third)).toContain(FAKE_SECRET);
  });

  it('the fake secret is visibly fake', () => {
    expect(FAKE_SECRET.startsWith('sk-ant-')).toBe(true);
    expect(FAKE_SECRET).toMatch(/FAKE/);
  });
});

describe('scripted model: tool_use ids', () => {
  it('are distinct per call index', () => {
    const ids = [1, 2, 3, 4].map((i) => onlyToolUse(scriptedPlan([user('hello')], i)).id);
    expect(new Set(ids).size).toBe(4);
  });

  it('are distinct per call index for tool calls and skips too', () => {
    const toolIds = [1, 2].map((i) => onlyToolUse(scriptedPlan([user('/tool ping {}')], i)).id);
    const skipIds = [1, 2].map((i) => onlyToolUse(scriptedPlan([user('/skip')], i)).id);
    expect(new Set([...toolIds, ...skipIds]).size).toBe(4);
  });

  it('are the same for the same call index (retries see the same plan)', () => {
    expect(scriptedPlan([user('hello')], 3)).toEqual(scriptedPlan([user('hello')], 3));
  });

  it('only use characters the Messages API accepts in ids', () => {
    for (const cmd of ['hello', '/skip', '/tool lookup {}', '/leak']) {
      expect(onlyToolUse(scriptedPlan([user(cmd)], 7)).id).toMatch(/^[a-zA-Z0-9_-]+$/);
    }
  });
});

describe('scripted model: [note] texts', () => {
  it('are not taken as the command in the same message', () => {
    expect(onlyToolUse(scriptedPlan([user('/skip', '[note] your plain-text reply was blocked')], 1)).name).toBe('skip');
  });

  it('are not taken as the command when they come after the user text', () => {
    const messages = [
      user('/tool ping {}'),
      assistant({ type: 'tool_use', id: 'p', name: 'ping', input: {} }),
      userBlocks(toolResult('p', 'pong'), text('[note] keep going')),
    ];
    expect(replyText(scriptedPlan(messages, 2))).toBe('tool result: pong');
  });

  it('a transcript of notes only has no command and echoes an empty text', () => {
    expect(replyText(scriptedPlan([user('[note] turn failed')], 1))).toBe('echo: ');
  });
});
