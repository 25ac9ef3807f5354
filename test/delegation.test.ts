import { tsToMs } from '@temporalio/common/lib/time';
import type { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { FAKE_SECRET } from '../domain/scripted-model';
import { conversationWorkflowId, delegateWorkflowId } from '../domain/ids';
import { delegateFinished } from '../contracts/conversation';
import { eventually, queueAnswer, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { quiescent } from './support/quiescence';

let keel: TestKeel;
beforeAll(async () => {
  keel = await startTestKeel();
});
afterAll(async () => keel?.stop());

async function api<T = Record<string, unknown>>(
  method: 'GET' | 'POST' | 'PUT' | 'PATCH',
  url: string,
  body?: unknown,
): Promise<{ status: number; body: T }> {
  const res = await keel.api.inject({
    method,
    url,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) }),
  });
  return { status: res.statusCode, body: res.json<T>() };
}

interface Message {
  seq: number;
  role: string;
  text: string;
}

async function messages(a: string, c: string): Promise<Message[]> {
  return (await api<{ messages: Message[] }>('GET', `/v1/agents/${a}/conversations/${c}?limit=1000`)).body.messages;
}

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

const relays = (ms: Message[]) => ms.filter((m) => m.role === 'assistant' && m.text.startsWith('relay: '));
const spawnedId = (text: string | undefined) => /spawned delegate (\S+)/.exec(text ?? '')?.[1];

interface DelegateView {
  lifecycle: string;
  outcome?: { kind: string; result: string; outcomeVersion: number; transcriptVersion: number; terminalOwner: string };
  admittedAt?: string;
  relay?: string;
  admissions: { decision: string; via: string }[];
}

async function delegate(a: string, id: string) {
  return (await api<DelegateView>('GET', `/v1/agents/${a}/delegates/${id}`)).body;
}

async function spawn(
  a: string,
  c: string,
  args: Record<string, unknown>,
): Promise<{ text: string; delegateId?: string }> {
  const res = await keel.post(a, c, { text: `/tool spawn_delegate ${JSON.stringify(args)}` }, { wait: 30 });
  const text = res.body.reply?.text ?? '';
  return { text, delegateId: spawnedId(text) };
}

describe('delegation through the REST API alone', () => {
  it('a ready task goes to a delegate; its outcome is committed, admitted once, relayed; task done', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const created = await api<{ number: number; status: string }>('POST', `/v1/agents/${a}/tasks`, {
      title: 'Write the summary',
      status: 'ready',
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ number: 1, status: 'ready' });

    const { text, delegateId } = await spawn(a, c, { task: 1 });
    expect(text).toMatch(/^tool result: spawned delegate \S+ for task #1/);
    const id = delegateId!;
    await eventually(async () => relays(await messages(a, c)).length === 1, 30_000, 'the relay');

    // The relay is recorded when the retrigger turn commits, just after its reply.
    const d = await eventually(
      async () => {
        const v = await delegate(a, id);
        return v.relay ? v : undefined;
      },
      30_000,
      'the relay to be recorded',
    );
    expect(d.outcome).toEqual({
      kind: 'success',
      result: 'done: Write the summary',
      outcomeVersion: 1,
      transcriptVersion: 1,
      terminalOwner: 'delegate',
    });
    expect(d.admittedAt).toBeTruthy();
    expect(d.relay).toBe('relayed');
    expect(d.admissions.filter((x) => x.decision === 'admitted')).toHaveLength(1);
    expect(relays(await messages(a, c))[0]!.text).toBe(`relay: ${id} success: done: Write the summary`);
    expect(
      (await messages(a, c)).filter((m) => m.role === 'system' && m.text === `delegate.finished ${id} (success)`),
    ).toHaveLength(1);

    const task = await api<{
      status: string;
      attempts: { delegateId: string; outcome: string; endedAt: string | null }[];
    }>('GET', `/v1/agents/${a}/tasks/1`);
    expect(task.body.status).toBe('done');
    expect(task.body.attempts.map((x) => [x.delegateId, x.outcome, typeof x.endedAt])).toEqual([
      [id, 'success', 'string'],
    ]);
  });
});

describe('admission of a spawn', () => {
  it('refuses pending_approval with its reason; after PATCH ready admits it; refuses a second spawn', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    await api('POST', `/v1/agents/${a}/tasks`, {
      title: 'Slow work',
      description: '/delay 3000 slow work',
      status: 'pending_approval',
    });
    const refused = await spawn(a, c, { task: 1 });
    expect(refused.text).toBe(
      'tool error: not spawned: task #1 is pending_approval — it must be approved (ready) before work starts',
    );

    expect((await api('PATCH', `/v1/agents/${a}/tasks/1`, { status: 'ready' })).status).toBe(200);
    const admitted = await spawn(a, c, { task: 1 });
    expect(admitted.delegateId).toBeTruthy();
    const again = await spawn(a, c, { task: 1 });
    expect(again.text).toMatch(/^tool error: not spawned: task #1 (is in_progress|already has an open attempt)/);
    expect(again.text).toContain(`already has an open attempt (delegate ${admitted.delegateId})`);
    await eventually(async () => relays(await messages(a, c)).length === 1, 30_000, 'the relay');
  });

  it('refuses unknown required skills, done tasks and a missing task; gives skill bodies to the delegate', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    await api('POST', `/v1/agents/${a}/tasks`, {
      title: 'Needs skills',
      description: '/skill Triage',
      status: 'ready',
      requiredSkills: ['triage', 'billing'],
    });
    expect((await spawn(a, c, { task: 1 })).text).toBe(
      'tool error: not spawned: task #1 requires unknown skill(s): triage, billing',
    );
    expect((await spawn(a, c, { task: 7 })).text).toBe('tool error: not spawned: task #7 not found');
    await api('PUT', `/v1/agents/${a}/skills/Triage`, { body: 'Sort by urgency first.\nThen by age.' });
    await api('PUT', `/v1/agents/${a}/skills/billing`, { body: 'Refunds need approval.' });
    const { delegateId } = await spawn(a, c, { task: 1 });
    await eventually(async () => (await delegate(a, delegateId!)).outcome, 30_000, 'the outcome');
    expect((await delegate(a, delegateId!)).outcome?.result).toBe('skill Triage: Sort by urgency first.');
    expect((await spawn(a, c, { task: 1 })).text).toBe('tool error: not spawned: task #1 is already done');
  });

  it('returns the running delegate for an identical ad-hoc task, and allows at most 5 live delegates', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const first = await spawn(a, c, { text: '/delay 30000 same thing' });
    const same = await spawn(a, c, { text: '/delay 30000 same thing' });
    expect(same.text).toBe(
      `tool result: not spawned again: delegate ${first.delegateId} is already working on this exact task`,
    );
    for (let i = 2; i <= 5; i++)
      expect((await spawn(a, c, { text: `/delay 30000 task ${i}` })).delegateId).toBeTruthy();
    const sixth = await spawn(a, c, { text: '/delay 30000 one too many' });
    expect(sixth.text).toMatch(/^tool error: not spawned: at most 5 delegates may run at once/);
    const state = await api<{ state: { liveDelegates: string[] } }>('GET', `/v1/agents/${a}/conversations/${c}`);
    expect(state.body.state.liveDelegates).toHaveLength(5);
  });
});

describe('how a delegate ends', () => {
  async function endOf(
    text: string,
    taskExtra: Record<string, unknown> = {},
  ): Promise<{ a: string; c: string; d: DelegateView; id: string }> {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    await api('POST', `/v1/agents/${a}/tasks`, { title: 'The task', description: text, status: 'ready', ...taskExtra });
    const { delegateId } = await spawn(a, c, { task: 1 });
    const id = delegateId!;
    const d = await eventually(
      async () => {
        const v = await delegate(a, id);
        return v.outcome ? v : undefined;
      },
      60_000,
      'the outcome',
    );
    return { a, c, d, id };
  }

  it('a wall-clock timeout after some model calls returns timeout with what was done', async () => {
    const { d } = await endOf('/work 20 1000 never finishes in time', { wallClockSeconds: 4 });
    expect(d.outcome).toMatchObject({ kind: 'timeout', terminalOwner: 'timeout' });
    expect(d.outcome?.result).toMatch(
      /^step \d+ of 20\n\(Delegate exceeded its 4s wall-clock timeout — partial result\)$/,
    );
    expect(Number(/^step (\d+)/.exec(d.outcome!.result)![1])).toBeGreaterThanOrEqual(2);
  });

  it('a cancel with a reason returns cancelled with that reason', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const { delegateId } = await spawn(a, c, { text: '/delay 20000 long job' });
    const res = await api('POST', `/v1/agents/${a}/delegates/${delegateId}/cancel`, {
      reason: 'the user changed their mind',
    });
    expect(res.status).toBe(202);
    const d = await eventually(async () => (await delegate(a, delegateId!)).outcome, 30_000, 'the outcome');
    expect(d).toMatchObject({
      kind: 'cancelled',
      terminalOwner: 'cancel',
      result: 'Delegate cancelled: the user changed their mind',
    });
    expect((await api('POST', `/v1/agents/${a}/delegates/${delegateId}/cancel`, { reason: 'again' })).status).toBe(409);
    await eventually(async () => relays(await messages(a, c)).length === 1, 30_000, 'the relay');
  });

  it('the conversation model can cancel its own delegate through cancel_delegate', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const { delegateId } = await spawn(a, c, { text: '/delay 20000 long job' });
    const res = await keel.post(
      a,
      c,
      { text: `/tool cancel_delegate ${JSON.stringify({ delegateId, reason: 'not needed any more' })}` },
      { wait: 30 },
    );
    expect(res.body.reply?.text).toBe(
      `tool result: cancel requested for delegate ${delegateId}; its outcome will come back`,
    );
    const d = await eventually(async () => (await delegate(a, delegateId!)).outcome, 30_000, 'the outcome');
    expect(d.result).toBe('Delegate cancelled: not needed any more');
  });

  it('a delegate that never sets an outcome is nudged twice, then failed', async () => {
    const { d, id, a } = await endOf('/noop thinking', { historyMode: 'clean' });
    expect(d.outcome).toMatchObject({ kind: 'failed', terminalOwner: 'delegate' });
    expect(d.outcome?.result).toBe('Delegate failed: finished without setting an outcome after 2 nudges');
    const { rows } = await keel.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM messages WHERE conversation_key = $1 AND role = 'assistant'`,
      [delegateWorkflowId(a, id)],
    );
    expect(Number(rows[0]!.n)).toBe(3);
    expect((await api<{ status: string }>('GET', `/v1/agents/${a}/tasks/1`)).body.status).toBe('failed');
  });

  it('ten exhausted segments of fifteen model calls end partial', async () => {
    const { d, id, a } = await endOf('/loop');
    expect(d.outcome).toMatchObject({ kind: 'partial', terminalOwner: 'delegate' });
    expect(d.outcome?.result).toBe(
      'still going (call 150)\n(reached max segments after 150 model calls — partial result)',
    );
    const { rows } = await keel.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM messages WHERE conversation_key = $1 AND text = $2`,
      [delegateWorkflowId(a, id), 'Continue where you left off. Do not repeat completed work.'],
    );
    expect(Number(rows[0]!.n)).toBe(9);
  });

  it('a delegate that is blocked says why', async () => {
    const { d } = await endOf('/blocked a login wall');
    expect(d.outcome).toMatchObject({ kind: 'blocked', result: 'Delegate blocked: a login wall' });
  });

  it('a model failure that retries cannot mend fails the delegate', async () => {
    const { d } = await endOf('/error 1 broken');
    expect(d.outcome?.kind).toBe('failed');
    expect(d.outcome?.result).toMatch(/^Delegate failed: scripted delegate error/);
  });
});

describe('admission in the conversation', () => {
  it('ignores a duplicate completion signal of a consumed version; rejects one whose versions disagree', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const { delegateId } = await spawn(a, c, { text: 'quick job' });
    const id = delegateId!;
    await eventually(async () => relays(await messages(a, c)).length === 1, 30_000, 'the relay');
    const handle = keel.client.workflow.getHandle(conversationWorkflowId(a, c));
    const claim = {
      delegateId: id,
      outcomeVersion: 1,
      transcriptVersion: 1,
      outcomeKind: 'success' as const,
      terminalOwner: 'delegate' as const,
    };
    await handle.signal(delegateFinished, claim);
    await handle.signal(delegateFinished, { ...claim, outcomeVersion: 2, outcomeKind: 'failed' });
    const d = await eventually(
      async () => {
        const v = await delegate(a, id);
        return v.admissions.some((x) => x.decision === 'rejected:mismatch') ? v : undefined;
      },
      30_000,
      'the mismatching signal to be decided',
    );
    // Admitted once (by its signal or by reconciliation at a turn end, whichever came first). The delegate's own signal
    // may land after that (ignored:consumed too), so only the counts and the order of the two sent here are fixed.
    const decisions = d.admissions.map((x) => x.decision);
    expect(decisions.filter((x) => x === 'admitted')).toHaveLength(1);
    expect(decisions.filter((x) => x === 'rejected:mismatch')).toHaveLength(1);
    expect(decisions.indexOf('admitted')).toBeLessThan(decisions.lastIndexOf('ignored:consumed'));
    expect(decisions.lastIndexOf('ignored:consumed')).toBeLessThan(decisions.indexOf('rejected:mismatch'));
    // A user message afterwards still gets its answer, and no second relay happens: counted once the delegate has
    // closed (no signal of its own can follow) and the conversation is at rest (nothing admitted waits to be relayed).
    expect((await keel.post(a, c, { text: 'anything new?' }, { wait: 30 })).body.reply?.text).toBe(
      'echo: anything new?',
    );
    await keel.client.workflow.getHandle(delegateWorkflowId(a, id)).result();
    await eventually(() => quiescent(keel.client, conversationWorkflowId(a, c)), 30_000, 'the conversation at rest');
    expect(relays(await messages(a, c))).toHaveLength(1);
  });

  it('relays at most 3 retriggers per user message; later results become notes', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const key = conversationWorkflowId(a, c);
    // One user message whose model call spawns four delegates, finishing far enough apart for a retrigger each.
    await queueAnswer(keel, a, c, {
      content: [0, 1, 2, 3].map((i) => ({
        type: 'tool_use' as const,
        id: `toolu_spawn_${i}`,
        name: 'spawn_delegate',
        input: { text: `/delay ${1000 + i * 3000} job ${i}`, historyMode: 'clean' },
      })),
      stopReason: 'tool_use',
      usage: { inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
    });
    await keel.post(a, c, { text: 'do four things' }, { wait: 30 });
    const { rows } = await keel.pool.query<{ delegate_id: string }>(
      'SELECT delegate_id FROM delegates WHERE conversation_key = $1 ORDER BY created_at',
      [key],
    );
    expect(rows).toHaveLength(4);
    const ids = rows.map((r) => r.delegate_id);
    await eventually(
      async () => (await Promise.all(ids.map((id) => delegate(a, id)))).every((d) => d.relay),
      60_000,
      'all four relayed or noted',
    );
    expect((await Promise.all(ids.map((id) => delegate(a, id)))).map((d) => d.relay)).toEqual([
      'relayed',
      'relayed',
      'relayed',
      'noted',
    ]);
    const ms = await messages(a, c);
    expect(relays(ms)).toHaveLength(3);
    expect(ms.some((m) => m.role === 'system' && m.text.startsWith(`[Background delegate ${ids[3]} success]`))).toBe(
      true,
    );
  });
});

describe('relay', () => {
  it('records "relay failed" on a result whose retrigger reply the guard blocks', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const { delegateId } = await spawn(a, c, { text: `/delay 10 ${FAKE_SECRET}`, historyMode: 'clean' });
    const d = await eventually(
      async () => {
        const v = await delegate(a, delegateId!);
        return v.relay ? v : undefined;
      },
      30_000,
      'the relay to be recorded',
    );
    expect(d.outcome?.kind).toBe('success');
    expect(d.relay).toBe('relay_failed');
    expect(relays(await messages(a, c))).toHaveLength(0);
  });
});

describe('a conversation or a delegate that goes away', () => {
  it('a delegate finishing after its conversation was terminated is admitted and relayed by the next run', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const { delegateId } = await spawn(a, c, { text: '/delay 2000 outlived it', historyMode: 'clean' });
    await keel.client.workflow
      .getHandle(conversationWorkflowId(a, c))
      .terminate('operator terminated the conversation');
    await eventually(async () => (await delegate(a, delegateId!)).outcome, 30_000, 'the outcome');
    expect((await keel.post(a, c, { text: 'back again' }, { wait: 30 })).body.reply?.text).toBe('echo: back again');
    await eventually(async () => relays(await messages(a, c)).length === 1, 30_000, 'the relay');
    expect(relays(await messages(a, c))[0]!.text).toBe(`relay: ${delegateId} success: done: outlived it`);
  });

  it('a conversation terminated inside the relay window: its next run relays the admitted result, once', async () => {
    // Admission starts the 500 ms wait for company; the relay turn comes when it fires. Terminate while it waits.
    const windowTimer = (events: HistoryEvent[]) =>
      events.find((e) => {
        const timer = e.timerStartedEventAttributes;
        return timer && tsToMs(timer.startToFireTimeout) === 500;
      });
    /** A fresh conversation whose delegate's result is admitted, terminated while its relay waits. */
    async function terminateInWindow() {
      const [a, c] = [uniqueId('a'), uniqueId('c')];
      const key = conversationWorkflowId(a, c);
      const { delegateId } = await spawn(a, c, { text: '/delay 1000 relayed by the next run', historyMode: 'clean' });
      const handle = keel.client.workflow.getHandle(key);
      const runId = await eventually(
        async () => {
          const [history, described] = await Promise.all([handle.fetchHistory(), handle.describe()]);
          return windowTimer(history.events ?? []) ? described.runId : undefined;
        },
        30_000,
        'the relay window',
      );
      await handle.terminate('terminated inside the relay window');
      // Inside the window: the timer never fired and no relay turn began (a stalled machine can miss 500 ms).
      const terminated = (await keel.client.workflow.getHandle(key, runId).fetchHistory()).events ?? [];
      const timerId = windowTimer(terminated)!.timerStartedEventAttributes!.timerId;
      const fired = terminated.some((e) => e.timerFiredEventAttributes?.timerId === timerId);
      const activities = terminated.flatMap((e) => e.activityTaskScheduledEventAttributes?.activityType?.name ?? []);
      return { a, c, key, id: delegateId!, inside: !fired && !activities.includes('startRetrigger') };
    }
    let t = await terminateInWindow();
    for (let tries = 1; tries < 3 && !t.inside; tries++) t = await terminateInWindow();
    expect(t.inside).toBe(true);
    const { a, c, key, id } = t;

    // Admitted by the delegate's signal, not relayed.
    const held = await delegate(a, id);
    expect(held.admissions.map((x) => [x.decision, x.via])).toEqual([['admitted', 'signal']]);
    expect(held.admittedAt).toBeTruthy();
    expect(held.relay).toBeUndefined();
    expect(relays(await messages(a, c))).toEqual([]);

    // The next run (started by the next message) takes the admitted result up and relays it.
    expect((await keel.post(a, c, { text: 'back again' }, { wait: 30 })).body.reply?.text).toBe('echo: back again');
    const d = await eventually(
      async () => {
        const v = await delegate(a, id);
        return v.relay ? v : undefined;
      },
      30_000,
      'the relay to be recorded',
    );
    expect(d.relay).toBe('relayed');
    // Once: counted with the delegate closed and the new run at rest; the result was admitted once, not again.
    await keel.client.workflow.getHandle(delegateWorkflowId(a, id)).result();
    await eventually(() => quiescent(keel.client, key), 30_000, 'the conversation at rest');
    const relayed = relays(await messages(a, c)).map((m) => m.text);
    expect(relayed).toEqual([`relay: ${id} success: done: relayed by the next run`]);
    expect((await delegate(a, id)).admissions.filter((x) => x.decision === 'admitted')).toHaveLength(1);
  });

  it('a delegate workflow cancelled through Temporal still commits its outcome, and it is relayed', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    await api('POST', `/v1/agents/${a}/tasks`, {
      title: 'Long',
      description: '/delay 30000 long',
      status: 'ready',
      historyMode: 'clean',
    });
    const { delegateId } = await spawn(a, c, { task: 1 });
    await keel.client.workflow.getHandle(delegateWorkflowId(a, delegateId!)).cancel();
    const d = await eventually(async () => (await delegate(a, delegateId!)).outcome, 30_000, 'the outcome');
    expect(d).toMatchObject({
      kind: 'cancelled',
      terminalOwner: 'cancel',
      result: 'Delegate cancelled: the delegate workflow was cancelled',
    });
    const task = await api<{ status: string; attempts: { endedAt: string | null }[] }>(
      'GET',
      `/v1/agents/${a}/tasks/1`,
    );
    expect(task.body.status).toBe('failed');
    expect(task.body.attempts[0]!.endedAt).not.toBeNull();
    await eventually(async () => relays(await messages(a, c)).length === 1, 30_000, 'the relay');
  });

  it('a delegate terminated outside Keel is failed by owner reconcile, its attempt closed, and relayed', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    await api('POST', `/v1/agents/${a}/tasks`, {
      title: 'Doomed',
      description: '/delay 30000 doomed',
      status: 'ready',
      historyMode: 'clean',
    });
    const { delegateId } = await spawn(a, c, { task: 1 });
    await keel.client.workflow.getHandle(delegateWorkflowId(a, delegateId!)).terminate('an operator terminated it');
    expect((await keel.post(a, c, { text: 'anything?' }, { wait: 30 })).body.reply?.text).toBe('echo: anything?');
    const d = await eventually(async () => (await delegate(a, delegateId!)).outcome, 30_000, 'the outcome');
    expect(d).toMatchObject({
      kind: 'failed',
      terminalOwner: 'reconcile',
      result: 'Delegate failed: its workflow ended (terminated) without committing an outcome',
    });
    const task = await api<{ status: string; attempts: { endedAt: string | null; outcome: string }[] }>(
      'GET',
      `/v1/agents/${a}/tasks/1`,
    );
    expect(task.body.status).toBe('failed');
    expect(task.body.attempts[0]).toMatchObject({ outcome: 'failed' });
    await eventually(async () => relays(await messages(a, c)).length === 1, 30_000, 'the relay');
  });

  it('refuses a task number beyond the range of task numbers without stalling the conversation', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    expect((await spawn(a, c, { task: 3_000_000_000 })).text).toMatch(
      /^tool error: invalid arguments for spawn_delegate/,
    );
    expect((await keel.post(a, c, { text: 'still here' }, { wait: 30 })).body.reply?.text).toBe('echo: still here');
  });
});

describe('history modes', () => {
  it('fork gives the delegate a copy of the conversation; clean gives it only the task', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    await keel.post(a, c, { text: 'remember the codeword heliotrope' }, { wait: 30 });
    const forked = await spawn(a, c, { text: 'recall the codeword', historyMode: 'fork' });
    const clean = await spawn(a, c, { text: 'recall nothing', historyMode: 'clean' });
    const transcriptOf = async (id: string) => {
      await eventually(async () => (await delegate(a, id)).outcome, 30_000, 'the outcome');
      const { rows } = await keel.pool.query<{ role: string; content: unknown }>(
        'SELECT role, content FROM messages WHERE conversation_key = $1 ORDER BY seq',
        [delegateWorkflowId(a, id)],
      );
      return JSON.stringify(rows);
    };
    expect(await transcriptOf(forked.delegateId!)).toContain('remember the codeword heliotrope');
    // The fork ends before the model call that spawned it: no tool call without its result reaches the delegate.
    const { rows } = await keel.pool.query<{ role: string; content: { type: string }[] }>(
      `SELECT role, content FROM messages WHERE conversation_key = $1 AND origin LIKE 'fork:%'
        ORDER BY seq DESC LIMIT 1`,
      [delegateWorkflowId(a, forked.delegateId!)],
    );
    expect(rows[0]!.role === 'assistant' && rows[0]!.content.some((b) => b.type === 'tool_use')).toBe(false);
    expect(await transcriptOf(clean.delegateId!)).not.toContain('heliotrope');
  });
});

describe('task, skill and delegate routes', () => {
  it('answer bad input and unknown resources with the error shape', async () => {
    const a = uniqueId('a');
    expect((await api('POST', `/v1/agents/${a}/tasks`, { description: 'no title' })).status).toBe(400);
    expect((await api('POST', `/v1/agents/${a}/tasks`, { title: 'x', status: 'in_progress' })).status).toBe(400);
    expect((await api('GET', `/v1/agents/${a}/tasks/99`)).status).toBe(404);
    expect((await api('PUT', `/v1/agents/${a}/skills/bad%20name`, { body: 'x' })).status).toBe(400);
    expect((await api('GET', `/v1/agents/${a}/delegates/00000000-0000-0000-0000-000000000000`)).status).toBe(404);
    expect(
      (await api('POST', `/v1/agents/${a}/delegates/00000000-0000-0000-0000-000000000000/cancel`, { reason: 'x' }))
        .status,
    ).toBe(404);
    await api('POST', `/v1/agents/${a}/tasks`, { title: 'x', status: 'ready' });
    const wrong = await api<{ error: { code: string; message: string } }>('PATCH', `/v1/agents/${a}/tasks/1`, {
      status: 'done',
    });
    expect(wrong.status).toBe(409);
    expect(wrong.body.error).toEqual({ code: 'invalid_transition', message: 'task #1 cannot move from ready to done' });
  });
});

describe('replay', () => {
  it("replays a delegate's recorded history and its conversation's against the current workflow code", async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const { delegateId } = await spawn(a, c, { text: '/work 3 10 three steps' });
    await eventually(async () => relays(await messages(a, c)).length === 1, 30_000, 'the relay');
    for (const id of [delegateWorkflowId(a, delegateId!), conversationWorkflowId(a, c)]) {
      const history = await keel.client.workflow.getHandle(id).fetchHistory();
      await expect(
        Worker.runReplayHistory({ workflowBundle: { codePath: inject('workflowBundlePath') } }, history),
      ).resolves.toBeUndefined();
    }
  });
});
