import { describe, expect, it } from 'vitest';
import {
  DELEGATION,
  NewTask,
  OUTCOME_KINDS,
  TASK_STATUSES,
  backgroundNote,
  forkHistory,
  forkNote,
  outcomeResult,
  recoverProgress,
  retriggerText,
  settleOutcome,
  taskRefusal,
  taskStatusAfter,
  terminalLifecycle,
  userMayMoveTask,
  type AdmittedResult,
  type EndEvent,
  type LiveLifecycle,
  type OutcomeKind,
  type TaskStatus,
} from '../../domain/delegation';
import type { ContentBlock } from '../../domain/model';
import type { TranscriptMessage, TranscriptRole } from '../../domain/transcript';

// ---- settleOutcome: the race table ----------------------------------------------------------------------------------

const LIVE: readonly LiveLifecycle[] = ['running', 'cancelling', 'timing_out', 'completing'];
const EVENTS: readonly EndEvent[] = ['success', 'partial', 'blocked', 'failure', 'cancel', 'timeout'];

/**
 * The expected outcome of every (state, event), written out from the rules (delegation.ts and the reference notes §4),
 * not derived from the implementation. `[withTranscript, withoutTranscript]` where the transcript matters.
 */
const RACE_TABLE: Record<LiveLifecycle, Record<EndEvent, OutcomeKind | [OutcomeKind, OutcomeKind]>> = {
  // In `running` each event maps to its own kind.
  running: {
    success: 'success',
    partial: 'partial',
    blocked: 'blocked',
    failure: 'failed',
    cancel: 'cancelled',
    timeout: 'timeout',
  },
  // A cancel or timeout while completing is partial; the delegate's own endings keep their kind.
  completing: {
    success: 'success',
    partial: 'partial',
    blocked: 'blocked',
    failure: 'failed',
    cancel: 'partial',
    timeout: 'partial',
  },
  // A failure or timeout while cancelling is partial with a transcript, else cancelled; blocked is partial.
  // (A partial while cancelling is not named by the rules; cancelling → partial is a legal edge, so partial.)
  cancelling: {
    success: 'success',
    partial: 'partial',
    blocked: 'partial',
    failure: ['partial', 'cancelled'],
    cancel: 'cancelled',
    timeout: ['partial', 'cancelled'],
  },
  // A failure or cancel while timing out is a timeout; blocked is partial. (Partial: timing_out → partial is legal.)
  timing_out: {
    success: 'success',
    partial: 'partial',
    blocked: 'partial',
    failure: 'timeout',
    cancel: 'timeout',
    timeout: 'timeout',
  },
};

const raceRows: [LiveLifecycle, EndEvent, boolean, OutcomeKind][] = LIVE.flatMap((state) =>
  EVENTS.flatMap((event) =>
    [true, false].map((hasTranscript): [LiveLifecycle, EndEvent, boolean, OutcomeKind] => {
      const e = RACE_TABLE[state][event];
      return [state, event, hasTranscript, Array.isArray(e) ? (hasTranscript ? e[0] : e[1]) : e];
    }),
  ),
);

/** The reference's monotonic lifecycle: the terminal values each live state may move to. */
const LEGAL_TERMINALS: Record<Exclude<LiveLifecycle, 'running'>, readonly string[]> = {
  cancelling: ['cancelled', 'succeeded', 'partial'],
  timing_out: ['timed_out', 'succeeded', 'partial'],
  completing: ['succeeded', 'partial', 'cancelled', 'blocked', 'failed'],
};

describe('settleOutcome', () => {
  it('covers every live state × end event × transcript flag', () => {
    expect(raceRows).toHaveLength(LIVE.length * EVENTS.length * 2);
  });

  it.each(raceRows)('%s + %s (transcript: %s) → %s', (state, event, hasTranscript, expected) => {
    expect(settleOutcome(state, event, hasTranscript)).toBe(expected);
  });

  it.each(LIVE.flatMap((state) => [true, false].map((t): [LiveLifecycle, boolean] => [state, t])))(
    'a success wins in %s (transcript: %s)',
    (state, hasTranscript) => {
      expect(settleOutcome(state, 'success', hasTranscript)).toBe('success');
    },
  );

  it.each([
    ['completing', 'cancel'],
    ['completing', 'timeout'],
  ] as const)('a %s delegate hit by a %s is partial, with or without a transcript', (state, event) => {
    expect(settleOutcome(state, event, true)).toBe('partial');
    expect(settleOutcome(state, event, false)).toBe('partial');
  });

  it.each([
    ['failure', true, 'partial'],
    ['failure', false, 'cancelled'],
    ['timeout', true, 'partial'],
    ['timeout', false, 'cancelled'],
  ] as const)('a %s while cancelling (transcript: %s) → %s', (event, hasTranscript, expected) => {
    expect(settleOutcome('cancelling', event, hasTranscript)).toBe(expected);
  });

  it.each([
    ['failure', true],
    ['failure', false],
    ['cancel', true],
    ['cancel', false],
  ] as const)('a %s while timing out (transcript: %s) is a timeout', (event, hasTranscript) => {
    expect(settleOutcome('timing_out', event, hasTranscript)).toBe('timeout');
  });

  it.each([
    ['cancelling', true],
    ['cancelling', false],
    ['timing_out', true],
    ['timing_out', false],
  ] as const)('blocked while %s (transcript: %s) is partial', (state, hasTranscript) => {
    expect(settleOutcome(state, 'blocked', hasTranscript)).toBe('partial');
  });

  it.each(raceRows.filter(([state]) => state !== 'running'))(
    '%s + %s (transcript: %s) commits a terminal the reference lifecycle allows',
    (state, event, hasTranscript) => {
      const legal = LEGAL_TERMINALS[state as Exclude<LiveLifecycle, 'running'>];
      expect(legal).toContain(terminalLifecycle(settleOutcome(state, event, hasTranscript)));
    },
  );
});

// ---- terminal lifecycle and task status -----------------------------------------------------------------------------

describe('terminalLifecycle and taskStatusAfter', () => {
  it.each([
    ['success', 'succeeded', 'done'],
    ['partial', 'partial', 'done'],
    ['timeout', 'timed_out', 'failed'],
    ['blocked', 'blocked', 'failed'],
    ['cancelled', 'cancelled', 'failed'],
    ['failed', 'failed', 'failed'],
  ] as const)('%s → lifecycle %s, task %s', (kind, lifecycle, status) => {
    expect(terminalLifecycle(kind)).toBe(lifecycle);
    expect(taskStatusAfter(kind)).toBe(status);
  });

  it('the table above names every outcome kind', () => {
    expect([...OUTCOME_KINDS].sort()).toEqual(['blocked', 'cancelled', 'failed', 'partial', 'success', 'timeout']);
  });
});

describe('userMayMoveTask', () => {
  it.each([
    ['pending_approval', 'ready', true],
    ['pending_approval', 'backlog', true],
    ['backlog', 'ready', true],
    ['backlog', 'pending_approval', true],
    ['ready', 'backlog', true],
    ['ready', 'pending_approval', true],
    ['done', 'ready', true],
    ['failed', 'ready', true],
    ['ready', 'done', false],
    ['ready', 'failed', false],
    ['ready', 'in_progress', false],
    ['pending_approval', 'in_progress', false],
    ['backlog', 'done', false],
    ['done', 'failed', false],
    ['failed', 'done', false],
    ['done', 'backlog', false],
  ] as const)('%s → %s: %s', (from, to, allowed) => {
    expect(userMayMoveTask(from, to)).toBe(allowed);
  });

  it.each(TASK_STATUSES)('in_progress → %s is refused (the delegate owns a running task)', (to) => {
    expect(userMayMoveTask('in_progress', to)).toBe(false);
  });

  it.each(TASK_STATUSES)('no status may be "moved" to itself (%s)', (s) => {
    expect(userMayMoveTask(s, s)).toBe(false);
  });
});

describe('taskRefusal', () => {
  it.each(['ready', 'in_progress'] as const)('admits a %s task', (status) => {
    expect(taskRefusal(7, status)).toBeUndefined();
  });

  it.each(['pending_approval', 'backlog'] as const)('refuses a %s task until it is approved', (status) => {
    expect(taskRefusal(7, status)).toBe(`task #7 is ${status} — it must be approved (ready) before work starts`);
  });

  it.each(['done', 'failed'] as const)('refuses a %s task as already finished', (status) => {
    expect(taskRefusal(12, status)).toBe(`task #12 is already ${status}`);
  });

  it('has an answer for every status', () => {
    const answered = TASK_STATUSES.map((s: TaskStatus) => [s, taskRefusal(1, s)] as const);
    expect(answered.filter(([, r]) => r === undefined).map(([s]) => s)).toEqual(['ready', 'in_progress']);
  });
});

// ---- fork history ---------------------------------------------------------------------------------------------------

const PAD = 'x'.repeat(200);
const block = (seq: number): ContentBlock[] => [{ type: 'text', text: `${seq}:${PAD}` }];
/** Messages with the given roles, seq 1…n, each of about the same size. */
function history(...roles: TranscriptRole[]): TranscriptMessage[] {
  return roles.map((role, i) => ({ seq: i + 1, role, content: block(i + 1) }));
}
/** The documented estimate: chars/4 of the content's JSON. */
const tokens = (ms: readonly TranscriptMessage[]) =>
  ms.reduce((n, m) => n + Math.ceil(JSON.stringify(m.content).length / 4), 0);
const seqs = (ms: readonly TranscriptMessage[]) => ms.map((m) => m.seq);

describe('forkHistory', () => {
  it('keeps everything under budget (removed 0)', () => {
    const ms = history('user', 'assistant', 'tool', 'assistant', 'user', 'assistant');
    const { kept, removed } = forkHistory(ms, tokens(ms) + 1);
    expect(kept).toEqual(ms);
    expect(removed).toBe(0);
  });

  it('keeps everything exactly at budget', () => {
    const ms = history('user', 'assistant', 'user', 'assistant', 'user', 'assistant');
    expect(forkHistory(ms, tokens(ms))).toEqual({ kept: ms, removed: 0 });
  });

  it('keeps an empty history empty', () => {
    expect(forkHistory([], 10)).toEqual({ kept: [], removed: 0 });
  });

  it('does not mutate its input', () => {
    const ms = history('user', 'assistant', 'user', 'assistant', 'user', 'assistant', 'user', 'assistant');
    const copy = structuredClone(ms);
    forkHistory(ms, 1);
    expect(ms).toEqual(copy);
  });

  it('drops the oldest messages first, keeping the newest as a suffix', () => {
    const ms = history(...Array<TranscriptRole>(10).fill('user'));
    // Eight fit: the oldest half (5) is dropped, and five fit.
    const { kept, removed } = forkHistory(ms, tokens(ms.slice(2)));
    expect(seqs(kept)).toEqual([6, 7, 8, 9, 10]);
    expect(removed).toBe(5);
    expect(tokens(kept)).toBeLessThanOrEqual(tokens(ms.slice(2)));
  });

  it('keeps at least 4 messages however small the budget', () => {
    const ms = history(...Array<TranscriptRole>(10).fill('user'));
    const { kept, removed } = forkHistory(ms, 1);
    expect(seqs(kept)).toEqual([7, 8, 9, 10]);
    expect(removed).toBe(6);
    expect(kept.length).toBe(DELEGATION.forkMinMessages);
  });

  it('never starts on an assistant row', () => {
    const ms = history(
      'user',
      'assistant',
      'user',
      'assistant',
      'user',
      'assistant',
      'user',
      'assistant',
      'user',
      'assistant',
    );
    const { kept, removed } = forkHistory(ms, 1);
    expect(kept[0]?.role).toBe('user');
    expect(seqs(kept)).toEqual([7, 8, 9, 10]);
    expect(removed).toBe(6);
  });

  it('never starts on a tool row', () => {
    const ms = history(
      'user',
      'assistant',
      'tool',
      'assistant',
      'user',
      'assistant',
      'tool',
      'assistant',
      'user',
      'assistant',
      'tool',
      'assistant',
    );
    const { kept, removed } = forkHistory(ms, 1);
    expect(kept[0]?.role).toBe('user');
    expect(seqs(kept)).toEqual([9, 10, 11, 12]);
    expect(removed).toBe(8);
  });

  it('may start on a system row (a note)', () => {
    const ms = history('user', 'assistant', 'user', 'assistant', 'system', 'user', 'assistant', 'user');
    const { kept, removed } = forkHistory(ms, 1);
    expect(kept[0]?.role).toBe('system');
    expect(seqs(kept)).toEqual([5, 6, 7, 8]);
    expect(removed).toBe(4);
  });

  it('drops a leading assistant or tool row even at or under the minimum', () => {
    const ms = history('assistant', 'tool', 'user', 'assistant');
    const { kept, removed } = forkHistory(ms, 1);
    expect(seqs(kept)).toEqual([3, 4]);
    expect(removed).toBe(2);
  });

  it('reports the removed count exactly (kept + removed = input) across shapes and budgets', () => {
    const shapes: TranscriptRole[][] = [
      ['user', 'assistant', 'tool', 'assistant', 'user', 'assistant', 'tool', 'assistant', 'user', 'assistant'],
      ['user', 'assistant', 'user', 'assistant', 'user', 'assistant', 'user', 'assistant', 'user', 'assistant', 'user'],
      [
        'system',
        'user',
        'assistant',
        'tool',
        'tool',
        'assistant',
        'user',
        'assistant',
        'tool',
        'assistant',
        'user',
        'assistant',
        'system',
      ],
      Array<TranscriptRole>(30).fill('user'),
    ];
    for (const roles of shapes) {
      const ms = history(...roles);
      for (const budget of [1, tokens(ms) / 4, tokens(ms) / 2, tokens(ms) - 1, tokens(ms)]) {
        const { kept, removed } = forkHistory(ms, budget);
        expect(removed).toBe(ms.length - kept.length);
        // The newest messages survive, in order.
        expect(kept).toEqual(ms.slice(ms.length - kept.length));
        if (kept.length > 0) expect(['user', 'system']).toContain(kept[0]?.role);
      }
    }
  });

  // A window that opens on a user row, keeps 4+ messages and fits the budget exists ([u3 … a8]): the fork finds it
  // even when halving would step past the last user row.
  it('keeps at least 4 messages when a user-led window of 4+ fits', () => {
    const ms = history('user', 'assistant', 'user', 'assistant', 'tool', 'assistant', 'tool', 'assistant');
    const { kept, removed } = forkHistory(ms, tokens(ms.slice(2)));
    expect(kept.length).toBeGreaterThanOrEqual(DELEGATION.forkMinMessages);
    expect(kept[0]?.role).toBe('user');
    expect(removed).toBe(ms.length - kept.length);
  });

  // [u1 a t a u5 a t a u9 a], budget tokens(5…10): u5…a10 (6 messages) fits and is kept, not just [u9, a10].
  it('keeps at least 4 messages after a long tool exchange', () => {
    const ms = history(
      'user',
      'assistant',
      'tool',
      'assistant',
      'user',
      'assistant',
      'tool',
      'assistant',
      'user',
      'assistant',
    );
    const { kept } = forkHistory(ms, tokens(ms.slice(4)));
    expect(kept.length).toBeGreaterThanOrEqual(DELEGATION.forkMinMessages);
  });
});

describe('forkNote', () => {
  it.each([
    [1, '[Forked context compacted: 1 older message removed]'],
    [0, '[Forked context compacted: 0 older messages removed]'],
    [2, '[Forked context compacted: 2 older messages removed]'],
    [37, '[Forked context compacted: 37 older messages removed]'],
  ])('forkNote(%i)', (n, text) => {
    expect(forkNote(n)).toBe(text);
  });
});

// ---- retrigger text -------------------------------------------------------------------------------------------------

const RELAY = 'Relay these results to the user with the reply tool, in your own words.';

describe('retriggerText', () => {
  it('names one result in the singular', () => {
    const text = retriggerText([{ delegateId: 'd1', kind: 'success', result: 'all done' }]);
    expect(text).toBe(
      [
        '1 background task just completed. The user has NOT seen any of the results below.',
        '--- delegate d1 (success) ---\nall done',
        RELAY,
      ].join('\n\n'),
    );
  });

  it('counts several results in the plural, each under its own header, in order', () => {
    const results: AdmittedResult[] = [
      { delegateId: 'a-1', kind: 'success', result: 'first' },
      { delegateId: 'b-2', kind: 'failed', result: 'Delegate failed: boom' },
      { delegateId: 'c-3', kind: 'partial', result: 'half\nway' },
    ];
    const text = retriggerText(results);
    expect(text.startsWith('3 background tasks just completed. The user has NOT seen any of the results below.')).toBe(
      true,
    );
    expect(text).toContain('--- delegate a-1 (success) ---\nfirst');
    expect(text).toContain('--- delegate b-2 (failed, NOT a full success) ---\nDelegate failed: boom');
    expect(text).toContain('--- delegate c-3 (partial, NOT a full success) ---\nhalf\nway');
    expect(text.indexOf('a-1')).toBeLessThan(text.indexOf('b-2'));
    expect(text.indexOf('b-2')).toBeLessThan(text.indexOf('c-3'));
    expect(text.endsWith(RELAY)).toBe(true);
  });

  it.each(OUTCOME_KINDS)('marks %s as a full success only when it is one', (kind) => {
    const text = retriggerText([{ delegateId: 'd', kind, result: 'r' }]);
    const header =
      kind === 'success' ? '--- delegate d (success) ---' : `--- delegate d (${kind}, NOT a full success) ---`;
    expect(text).toContain(`${header}\nr`);
    expect(text.includes('NOT a full success')).toBe(kind !== 'success');
    expect(text.endsWith(RELAY)).toBe(true);
  });
});

describe('backgroundNote', () => {
  const r: AdmittedResult = { delegateId: 'd7', kind: 'success', result: 'the answer' };

  it('formats a note without a reason', () => {
    expect(backgroundNote(r)).toBe('[Background delegate d7 success]: the answer');
  });

  it('adds the reason in parentheses', () => {
    expect(backgroundNote({ ...r, kind: 'failed' }, 'retrigger cap reached')).toBe(
      '[Background delegate d7 failed] (retrigger cap reached): the answer',
    );
  });
});

// ---- outcome results and recovery ----------------------------------------------------------------------------------

describe('outcomeResult', () => {
  it('success is the outcome text', () => {
    expect(outcomeResult('success', { outcomeText: 'done: it' })).toBe('done: it');
    expect(outcomeResult('success', {})).toBe('');
  });

  it('blocked gives the reason', () => {
    expect(outcomeResult('blocked', { reason: 'login wall at https://x' })).toBe(
      'Delegate blocked: login wall at https://x',
    );
    expect(outcomeResult('blocked', {})).toBe('Delegate blocked: no reason given');
  });

  it('partial keeps the recovered text and names the number of model calls', () => {
    expect(outcomeResult('partial', { recovered: 'step 9 of 10', modelCalls: 150 })).toBe(
      'step 9 of 10\n(reached max segments after 150 model calls — partial result)',
    );
  });

  it('partial falls back to the outcome text, then to the note alone', () => {
    expect(outcomeResult('partial', { outcomeText: 'so far', modelCalls: 3 })).toBe(
      'so far\n(reached max segments after 3 model calls — partial result)',
    );
    expect(outcomeResult('partial', { modelCalls: 150 })).toBe(
      '(reached max segments after 150 model calls — partial result)',
    );
  });

  it('timeout with recovered text keeps it and marks it partial', () => {
    expect(outcomeResult('timeout', { recovered: 'step 2 of 5', wallClockSeconds: 1800 })).toBe(
      'step 2 of 5\n(Delegate exceeded its 1800s wall-clock timeout — partial result)',
    );
  });

  it('timeout without recovered text says nothing was produced', () => {
    expect(outcomeResult('timeout', { wallClockSeconds: 60 })).toBe(
      'Delegate exceeded its 60s wall-clock timeout before producing any result',
    );
    expect(outcomeResult('timeout', { recovered: '', wallClockSeconds: 60 })).toBe(
      'Delegate exceeded its 60s wall-clock timeout before producing any result',
    );
  });

  it('cancelled keeps the reason', () => {
    expect(outcomeResult('cancelled', { reason: 'the user changed their mind' })).toBe(
      'Delegate cancelled: the user changed their mind',
    );
    expect(outcomeResult('cancelled', {})).toBe('Delegate cancelled: cancelled');
  });

  it('failed gives the error', () => {
    expect(outcomeResult('failed', { reason: 'boom' })).toBe('Delegate failed: boom');
    expect(outcomeResult('failed', {})).toBe('Delegate failed: unknown error');
  });
});

const setStatus = (text: unknown, kind = 'progress'): ContentBlock => ({
  type: 'tool_use',
  id: `t_${String(text)}`,
  name: 'set_status',
  input: { kind, text },
});
const said = (t: string): ContentBlock => ({ type: 'text', text: t });
const row = (seq: number, role: TranscriptRole, ...content: ContentBlock[]): TranscriptMessage => ({
  seq,
  role,
  content,
});

describe('recoverProgress', () => {
  it('returns undefined for an empty transcript', () => {
    expect(recoverProgress([])).toBeUndefined();
  });

  it('returns undefined when no assistant said anything', () => {
    expect(
      recoverProgress([row(1, 'user', said('Task: x')), row(2, 'assistant'), row(3, 'assistant', said('   '))]),
    ).toBeUndefined();
  });

  it('prefers the last set_status text over the last assistant text, even a later one', () => {
    const ms = [
      row(1, 'user', said('Task: x')),
      row(2, 'assistant', said('starting'), setStatus('step 1 of 3')),
      row(3, 'tool', { type: 'tool_result', tool_use_id: 't', content: 'ok' }),
      row(4, 'assistant', setStatus('step 2 of 3')),
      row(5, 'tool', { type: 'tool_result', tool_use_id: 't', content: 'ok' }),
      row(6, 'assistant', said('thinking out loud')),
    ];
    expect(recoverProgress(ms)).toBe('step 2 of 3');
  });

  it('takes the last set_status block within one message', () => {
    expect(recoverProgress([row(1, 'assistant', setStatus('first'), setStatus('second'))])).toBe('second');
  });

  it('ignores set_status calls without a text and other tools', () => {
    const ms = [
      row(1, 'assistant', setStatus('real progress')),
      row(2, 'assistant', { type: 'tool_use', id: 'x', name: 'shell', input: { text: 'not a status' } }, setStatus(42)),
    ];
    expect(recoverProgress(ms)).toBe('real progress');
  });

  it('falls back to the last assistant text, joined and trimmed', () => {
    const ms = [
      row(1, 'user', said('Task: x')),
      row(2, 'assistant', said('older')),
      row(3, 'assistant', said('  newest '), said('words  ')),
      row(4, 'user', said('user text')),
    ];
    expect(recoverProgress(ms)).toBe('newest words');
  });

  it('skips an empty last assistant message for an earlier one with text', () => {
    expect(recoverProgress([row(1, 'assistant', said('kept')), row(2, 'assistant', said(''))])).toBe('kept');
  });

  it('ignores user, tool and system text', () => {
    expect(
      recoverProgress([
        row(1, 'user', said('u')),
        row(2, 'system', said('s')),
        row(3, 'tool', { type: 'tool_result', tool_use_id: 'a', content: 'r' }),
      ]),
    ).toBeUndefined();
  });
});

// ---- NewTask --------------------------------------------------------------------------------------------------------

describe('NewTask', () => {
  it('fills the defaults', () => {
    expect(NewTask.parse({ title: 'Write the report' })).toEqual({
      title: 'Write the report',
      description: '',
      status: 'backlog',
      requiredSkills: [],
      historyMode: 'fork',
      wallClockSeconds: 1800,
      // Without a list of its own, the task's delegate may use every tool server of the agent.
      toolServers: null,
    });
    expect(DELEGATION.defaultWallClockSeconds).toBe(1800);
  });

  it('keeps given values', () => {
    const t = NewTask.parse({
      title: 't',
      description: 'd',
      status: 'ready',
      requiredSkills: ['web.search-2'],
      historyMode: 'clean',
      wallClockSeconds: 60,
      toolServers: ['fs'],
    });
    expect(t).toEqual({
      title: 't',
      description: 'd',
      status: 'ready',
      requiredSkills: ['web.search-2'],
      historyMode: 'clean',
      wallClockSeconds: 60,
      toolServers: ['fs'],
    });
  });

  it('refuses a tool server name that is not one', () => {
    const bad = NewTask.safeParse({ title: 't', toolServers: ['Not A Name'] });
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0]?.message).toBe('a tool server name is 1 to 32 lowercase letters, digits or hyphens');
  });

  it.each(['pending_approval', 'backlog', 'ready'])('accepts status %s at creation', (status) => {
    expect(NewTask.safeParse({ title: 't', status }).success).toBe(true);
  });

  it.each([
    ['status in_progress', { title: 't', status: 'in_progress' }],
    ['status done', { title: 't', status: 'done' }],
    ['status failed', { title: 't', status: 'failed' }],
    ['an unknown field', { title: 't', priority: 'high' }],
    ['an empty title', { title: '' }],
    ['a missing title', {}],
    ['a NUL in the title', { title: 'a\u0000b' }],
    ['a NUL in the description', { title: 't', description: 'a\u0000b' }],
    ['a title over 500 characters', { title: 'x'.repeat(501) }],
    ['an unknown history mode', { title: 't', historyMode: 'branch' }],
    ['a zero wall clock', { title: 't', wallClockSeconds: 0 }],
    ['a fractional wall clock', { title: 't', wallClockSeconds: 1.5 }],
    ['a wall clock over a day', { title: 't', wallClockSeconds: 86_401 }],
    ['a skill name with a space', { title: 't', requiredSkills: ['bad name'] }],
    ['an empty skill name', { title: 't', requiredSkills: [''] }],
  ])('refuses %s', (_label, input) => {
    expect(NewTask.safeParse(input).success).toBe(false);
  });
});
