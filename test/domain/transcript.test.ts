import { describe, expect, it } from 'vitest';
import type { ContentBlock } from '../../domain/model';
import {
  textOf,
  toModelMessages,
  toolResult,
  toolUses,
  trimWindowStart,
  type TranscriptMessage,
  type TranscriptRole,
} from '../../domain/transcript';

let seq = 0;
const row = (role: TranscriptRole, ...content: ContentBlock[]): TranscriptMessage => ({ seq: ++seq, role, content });
const text = (t: string): ContentBlock => ({ type: 'text', text: t });
const use = (id: string, name = 'reply', input: Record<string, unknown> = { text: 'hi' }): ContentBlock => ({
  type: 'tool_use',
  id,
  name,
  input,
});
const result = (id: string, content = 'ok'): ContentBlock => ({ type: 'tool_result', tool_use_id: id, content });

describe('toModelMessages', () => {
  it('keeps alternating user and assistant rows as they are', () => {
    const rows = [row('user', text('hi')), row('assistant', text('hello')), row('user', text('bye'))];
    expect(toModelMessages(rows)).toEqual([
      { role: 'user', content: [text('hi')] },
      { role: 'assistant', content: [text('hello')] },
      { role: 'user', content: [text('bye')] },
    ]);
  });

  it('sends tool rows as user content', () => {
    const rows = [
      row('user', text('weather?')),
      row('assistant', use('t1', 'lookup')),
      row('tool', result('t1', 'sunny')),
    ];
    expect(toModelMessages(rows)).toEqual([
      { role: 'user', content: [text('weather?')] },
      { role: 'assistant', content: [use('t1', 'lookup')] },
      { role: 'user', content: [result('t1', 'sunny')] },
    ]);
  });

  it('sends system notes as user text with a [note] prefix', () => {
    const rows = [
      row('user', text('hi')),
      row('assistant', text('{oops')),
      row('system', text('your reply was blocked')),
    ];
    expect(toModelMessages(rows)[2]).toEqual({ role: 'user', content: [text('[note] your reply was blocked')] });
  });

  it('prefixes only the text blocks of a note', () => {
    const rows = [row('system', text('a'), result('t1', 'r'), text('b'))];
    expect(toModelMessages(rows)).toEqual([
      { role: 'user', content: [text('[note] a'), result('t1', 'r'), text('[note] b')] },
    ]);
  });

  it('does not prefix user or tool text', () => {
    const rows = [row('user', text('plain'))];
    expect(toModelMessages(rows)).toEqual([{ role: 'user', content: [text('plain')] }]);
  });

  it('merges consecutive rows of the same model role, in order', () => {
    const rows = [
      row('user', text('first')),
      row('user', text('second')),
      row('assistant', use('t1')),
      row('tool', result('t1')),
      row('system', text('blocked')),
      row('user', text('steered')),
      row('assistant', text('a')),
      row('assistant', text('b')),
    ];
    expect(toModelMessages(rows)).toEqual([
      { role: 'user', content: [text('first'), text('second')] },
      { role: 'assistant', content: [use('t1')] },
      { role: 'user', content: [result('t1'), text('[note] blocked'), text('steered')] },
      { role: 'assistant', content: [text('a'), text('b')] },
    ]);
  });

  it('drops empty rows, and merges across them', () => {
    const rows = [row('user', text('one')), row('assistant'), row('user', text('two')), row('system')];
    expect(toModelMessages(rows)).toEqual([{ role: 'user', content: [text('one'), text('two')] }]);
  });

  it('gives nothing for no rows', () => {
    expect(toModelMessages([])).toEqual([]);
  });

  it('does not change the rows it was given', () => {
    const rows = [row('user', text('a')), row('user', text('b')), row('system', text('n'))];
    const before = structuredClone(rows);
    toModelMessages(rows);
    expect(rows).toEqual(before);
  });
});

describe('trimWindowStart', () => {
  it('keeps a window that starts on a user row', () => {
    const rows = [row('user', text('a')), row('assistant', text('b'))];
    expect(trimWindowStart(rows)).toEqual(rows);
  });

  it('keeps a window that starts on a system note', () => {
    const rows = [row('system', text('n')), row('assistant', text('b'))];
    expect(trimWindowStart(rows)).toEqual(rows);
  });

  it('drops leading assistant and tool rows', () => {
    const keep = [row('user', text('next')), row('assistant', use('t2')), row('tool', result('t2'))];
    const rows = [
      row('tool', result('t0')),
      row('assistant', use('t1')),
      row('tool', result('t1')),
      row('assistant', text('done')),
      ...keep,
    ];
    expect(trimWindowStart(rows)).toEqual(keep);
  });

  it('never starts on a tool or assistant row', () => {
    const roles: TranscriptRole[] = ['assistant', 'tool', 'user', 'system'];
    // Every window of length 0–4 over the four roles.
    const windows: TranscriptRole[][] = [[]];
    for (let len = 1; len <= 4; len++) {
      for (const w of windows.filter((x) => x.length === len - 1)) for (const r of roles) windows.push([...w, r]);
    }
    for (const w of windows) {
      const trimmed = trimWindowStart(w.map((r) => row(r, text(r))));
      const first = trimmed[0];
      if (first) expect(['user', 'system']).toContain(first.role);
      const firstKept = w.findIndex((r) => r === 'user' || r === 'system');
      expect(trimmed.length).toBe(firstKept < 0 ? 0 : w.length - firstKept);
    }
  });

  it('gives nothing when only assistant and tool rows are left', () => {
    expect(trimWindowStart([row('assistant', use('t1')), row('tool', result('t1'))])).toEqual([]);
  });

  it('the trimmed window maps to messages that start with the user', () => {
    const rows = [
      row('tool', result('t0')),
      row('assistant', text('x')),
      row('system', text('n')),
      row('assistant', text('y')),
    ];
    expect(toModelMessages(trimWindowStart(rows))[0]?.role).toBe('user');
  });
});

describe('textOf and toolUses', () => {
  const content: ContentBlock[] = [
    text('Hello, '),
    use('t1', 'lookup', { q: 1 }),
    result('t0'),
    text('world'),
    use('t2', 'reply'),
  ];

  it('textOf joins the text blocks only', () => {
    expect(textOf(content)).toBe('Hello, world');
    expect(textOf([use('t1')])).toBe('');
    expect(textOf([])).toBe('');
  });

  it('toolUses lists the tool_use blocks only, in order', () => {
    expect(toolUses(content).map((b) => [b.id, b.name])).toEqual([
      ['t1', 'lookup'],
      ['t2', 'reply'],
    ]);
    expect(toolUses([text('x'), result('t1')])).toEqual([]);
  });

  it('toolResult marks errors only when asked', () => {
    expect(toolResult('t1', 'ok')).toEqual({ type: 'tool_result', tool_use_id: 't1', content: 'ok' });
    expect(toolResult('t1', 'bad', true)).toEqual({
      type: 'tool_result',
      tool_use_id: 't1',
      content: 'bad',
      is_error: true,
    });
  });
});
