import { describe, expect, it } from 'vitest';
import {
  NO_PROMPT,
  RoutineDefinition,
  artifactTitle,
  checkRoutineSchedule,
  isCrash,
  parseAuthoredTool,
  placeholderArguments,
  placeholderFor,
  playbookOutcome,
  routinePrompt,
  selectTool,
  toolArguments,
  unknownCapabilities,
} from '../../domain/routines';

const now = new Date('2026-06-01T12:00:00Z');

describe('routine schedules', () => {
  it.each([
    ['daily', '0 9 * * *', '2026-06-02T09:00:00.000Z'],
    ['hourly', '0 * * * *', '2026-06-01T13:00:00.000Z'],
    ['6h', '0 */6 * * *', '2026-06-01T18:00:00.000Z'],
    ['30 8 * * MON', '30 8 * * MON', '2026-06-08T08:30:00.000Z'],
  ])('%s → %s', (expr, cron, next) => {
    const v = checkRoutineSchedule(expr, 'UTC', now);
    expect(v).toEqual({ ok: true, cron, tz: 'UTC', next: new Date(next) });
  });

  it.each([
    ['*/5 * * * *', /at least 15 minutes apart/],
    ['@daily', /nicknames/],
    ['0 9 * *', /exactly 5 fields/],
    ['25h', /N from 1 to 24/],
    ['0 0 30 2 *', /no future fire|does not parse/],
  ])('refuses %s', (expr, message) => {
    const v = checkRoutineSchedule(expr, 'UTC', now);
    expect(v.ok).toBe(false);
    if (!v.ok) expect(v.error).toMatch(message);
  });

  // Temporal's Schedules read these differently from croner, which computes the fires here: refused, as for jobs.
  it.each([
    ['0 9 L * *', /not L, W, # or \?/],
    ['0 9 15W * *', /not L, W, # or \?/],
    ['0 9 * * 1#2', /not L, W, # or \?/],
    ['0 9 ? * MON', /not L, W, # or \?/],
    ['0 9 1 * MON', /day-of-month or day-of-week, not both/],
  ])('refuses the cron %s as a job would', (expr, message) => {
    const v = checkRoutineSchedule(expr, 'UTC', now);
    expect(v.ok).toBe(false);
    if (!v.ok) expect(v.error).toMatch(message);
  });

  it('keeps month and weekday names, and the shorthands, which the cron checks never see as L or W', () => {
    expect(checkRoutineSchedule('0 9 * JUL WED', 'UTC', now)).toMatchObject({ ok: true, cron: '0 9 * JUL WED' });
    expect(checkRoutineSchedule('24h', 'UTC', now)).toMatchObject({ ok: true, cron: '0 9 * * *' });
  });

  it('the floor is configurable', () => {
    expect(checkRoutineSchedule('*/5 * * * *', 'UTC', now, 5 * 60_000).ok).toBe(true);
  });
});

describe('the prompt of a run', () => {
  it('takes the playbook rule, then the prompt, then the label; none fails the run without dispatch', () => {
    expect(routinePrompt({ playbook: 'rule', prompt: 'prompt', label: 'label' })).toEqual({ prompt: 'rule' });
    expect(routinePrompt({ playbook: '  ', prompt: 'prompt', label: 'label' })).toEqual({ prompt: 'prompt' });
    expect(routinePrompt({ label: 'label' })).toEqual({ prompt: 'label' });
    expect(routinePrompt({ playbook: null, prompt: '', label: '' })).toEqual({ error: NO_PROMPT });
  });
});

describe('tool selection', () => {
  const tools = [
    { name: 'scoreLeads', title: 'Score new leads by fit' },
    { name: 'weeklySummary', title: 'Weekly pipeline summary' },
    { name: 'leadDigest', title: 'Digest of new leads' },
  ];

  it('an exact mention of a name or a full title wins', () => {
    expect(selectTool('please run weeklySummary now', tools)?.name).toBe('weeklySummary');
    expect(selectTool('Use the "Digest of new leads" tool', tools)?.name).toBe('leadDigest');
  });

  it('else the most title words (3+ letters, whole words), at least 2, ties to the older tool', () => {
    expect(selectTool('score the leads that are new', tools)?.name).toBe('scoreLeads');
    expect(selectTool('a summary of the weekly numbers', tools)?.name).toBe('weeklySummary');
    expect(selectTool('new leads today', tools)?.name).toBe('scoreLeads');
  });

  it('one word is not enough, and a word inside another word does not count', () => {
    expect(selectTool('check the leads', tools)).toBeUndefined();
    expect(selectTool('underscored renewal summaryless', tools)).toBeUndefined();
    expect(selectTool('anything', [])).toBeUndefined();
  });
});

describe('authoring', () => {
  it('takes the first balanced JSON object of the answer and derives a missing title and purpose', () => {
    const reply =
      'Here you go:\n{"name":"countRecords","inputs":["table"],' +
      '"code":"async function countRecords(table){ return {n: (await data.list(table)).length}; }"} done {"x":1}';
    const parsed = parseAuthoredTool(reply);
    expect(parsed).toEqual({
      ok: true,
      tool: {
        name: 'countRecords',
        title: 'countRecords',
        purpose: 'countRecords',
        inputs: ['table'],
        code: 'async function countRecords(table){ return {n: (await data.list(table)).length}; }',
      },
    });
  });

  it('refuses an answer without a name or code, or without JSON', () => {
    expect(parseAuthoredTool('no json here').ok).toBe(false);
    expect(parseAuthoredTool('{"name":"x"}').ok).toBe(false);
    expect(parseAuthoredTool('{"code":"1"}').ok).toBe(false);
    expect(parseAuthoredTool('{"name":"not an identifier","code":"1"}').ok).toBe(false);
    expect(parseAuthoredTool('{"name":"a","code":"}').ok).toBe(false);
  });

  it('finds calls to capabilities that do not exist', () => {
    expect(unknownCapabilities('await data.list("t"); await ai.score(x, "r"); await send({text:"hi"});')).toEqual([]);
    expect(unknownCapabilities('await data.delete("t"); await ai.translate(x); await data.delete("u")')).toEqual([
      'data.delete',
      'ai.translate',
    ]);
  });

  it('gives placeholder arguments by input name', () => {
    expect(
      ['email', 'dueDate', 'since', 'count', 'price', 'id', 'recordId', 'name', 'title', 'tone', 'valid', 'query'].map(
        placeholderFor,
      ),
    ).toEqual([
      'sample@example.com',
      '2026-01-15',
      '2026-01-15',
      '10',
      '10',
      'rec-1',
      'rec-1',
      'Sample Record',
      'Sample Record',
      'priority',
      'sample',
      'sample',
    ]);
  });

  it('counts a crash of the code, not a gate or a time limit', () => {
    for (const d of [
      'ReferenceError: x is not defined',
      'TypeError: a.b is not a function',
      "Cannot read properties of undefined (reading 'x')",
      'SyntaxError: Unexpected token',
    ]) {
      expect(isCrash(d)).toBe(true);
    }
    expect(isCrash('needs approval: send')).toBe(false);
    expect(isCrash('Script execution timed out.')).toBe(false);
    expect(isCrash(`${'x'.repeat(300)} ReferenceError`)).toBe(false);
  });
});

describe('routine runs', () => {
  it('maps run statuses to the playbook log: success, partial while waiting for approval, aborted otherwise', () => {
    expect(
      ['ok', 'needs_approval', 'rejected', 'error', 'running'].map((s) =>
        playbookOutcome(s as Parameters<typeof playbookOutcome>[0]),
      ),
    ).toEqual(['success', 'partial', 'aborted', 'aborted', null]);
  });

  it('passes the prompt as `input` and "" to every other input; smoke runs get placeholders', () => {
    expect(toolArguments(['input', 'recordId'], 'do it')).toEqual({ input: 'do it', recordId: '' });
    expect(placeholderArguments(['input', 'email'])).toEqual({ input: 'sample', email: 'sample@example.com' });
  });

  it('titles artifacts <kebab-name>-run-<n>.md', () => {
    expect(artifactTitle('scoreLeads', 3)).toBe('score-leads-run-3.md');
    expect(artifactTitle('weekly_summary', 1)).toBe('weekly-summary-run-1.md');
    expect(artifactTitle('--', 2)).toBe('routine-run-2.md');
  });

  it('takes a routine definition and nothing else', () => {
    expect(
      RoutineDefinition.safeParse({
        label: 'x',
        schedule: { expr: 'daily', tz: 'Europe/Paris' },
        prompt: 'p',
        delivery: { channel: 'none' },
      }).success,
    ).toBe(true);
    expect(RoutineDefinition.safeParse({ label: 'x', schedule: { expr: 'daily' }, owner: 'me' }).success).toBe(false);
    expect(RoutineDefinition.safeParse({ label: 'x', schedule: { expr: 'daily' }, prompt: 'a\u0000b' }).success).toBe(
      false,
    );
  });
});
