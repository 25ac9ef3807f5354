/**
 * Idle conversations cost nothing: a conversation's workflow closes once it has had nothing to do for its idle time,
 * and its next message starts a new run. What must hold across that close: a message arriving at the instant of the
 * close is answered exactly once, and a conversation with a delegate out stays open until the result is relayed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversationWorkflowId } from '../domain/ids';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { quiescent } from './support/quiescence';

const IDLE_MS = 1_500;

/** The run ids of a workflow id, oldest first, with their status. */
async function runsOf(keel: TestKeel, workflowId: string): Promise<{ runId: string; status: string }[]> {
  const runs: { runId: string; status: string }[] = [];
  for await (const w of keel.client.workflow.list({ query: `WorkflowId = '${workflowId}'` }))
    runs.push({ runId: w.runId, status: w.status.name });
  return runs.reverse();
}

async function closed(keel: TestKeel, workflowId: string): Promise<boolean> {
  return (await keel.client.workflow.getHandle(workflowId).describe()).status.name === 'COMPLETED';
}

async function turnsOf(keel: TestKeel, key: string, messageId: string): Promise<{ status: string }[]> {
  const { rows } = await keel.pool.query<{ status: string }>(
    'SELECT status FROM turns WHERE conversation_key = $1 AND message_id = $2',
    [key, messageId],
  );
  return rows;
}

async function eventCount(keel: TestKeel, key: string, type: string): Promise<number> {
  const { rows } = await keel.pool.query<{ n: string }>(
    'SELECT count(*) AS n FROM conversation_events WHERE conversation_key = $1 AND type = $2',
    [key, type],
  );
  return Number(rows[0]!.n);
}

describe('a conversation closes when idle', () => {
  let keel: TestKeel;
  beforeAll(async () => {
    keel = await startTestKeel({ conversationIdleMs: IDLE_MS });
  });
  afterAll(() => keel.stop());

  it('closes after its idle time; its next message starts a new run, answered with the transcript kept', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const id = conversationWorkflowId(a, c);
    expect((await keel.post(a, c, { text: 'first' }, { wait: 30 })).body.status).toBe('replied');
    await eventually(() => closed(keel, id), 30_000, 'the idle close');
    expect(await eventCount(keel, id, 'conversation.idle')).toBe(1);

    const again = await keel.post(a, c, { text: 'second' }, { wait: 30 });
    expect(again.body).toMatchObject({ status: 'replied', reply: { text: 'echo: second' } });
    const runs = await runsOf(keel, id);
    expect(runs).toHaveLength(2);
    expect(runs[0]!.status).toBe('COMPLETED');
    // One transcript across both runs.
    const view = await keel.api.inject({ method: 'GET', url: `/v1/agents/${a}/conversations/${c}` });
    expect(
      view
        .json<{ messages: { role: string; text: string }[] }>()
        .messages.filter((m) => m.role === 'assistant')
        .map((m) => m.text),
    ).toEqual(['echo: first', 'echo: second']);
  });

  it('turns in quick succession share one idle timer; the close still waits the idle time after the last', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const id = conversationWorkflowId(a, c);
    for (const text of ['one', 'two', 'three', 'four'])
      expect((await keel.post(a, c, { text }, { wait: 30 })).body.status).toBe('replied');
    await eventually(() => closed(keel, id), 30_000, 'the idle close');
    const { rows } = await keel.pool.query<{ last: Date }>(
      'SELECT max(finished_at) AS last FROM turns WHERE conversation_key = $1',
      [id],
    );
    for (const run of await runsOf(keel, id)) {
      const handle = keel.client.workflow.getHandle(id, run.runId);
      const { startTime, closeTime } = await handle.describe();
      const events = (await handle.fetchHistory()).events ?? [];
      const timers = events.filter((e) => e.timerStartedEventAttributes).length;
      // A timer per turn would be four in one run; one spans the turns, plus one per idle time the run lived.
      const lived = closeTime!.getTime() - startTime.getTime();
      expect(timers).toBeLessThanOrEqual(1 + Math.floor(lived / IDLE_MS));
    }
    const { closeTime } = await keel.client.workflow.getHandle(id).describe();
    expect(closeTime!.getTime() - rows[0]!.last.getTime()).toBeGreaterThanOrEqual(IDLE_MS - 50);
  });

  it('a busy conversation does not close: a turn longer than the idle time ends, then it closes', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const id = conversationWorkflowId(a, c);
    const slow = await keel.post(a, c, { text: `/delay ${IDLE_MS * 2} slow` }, { wait: 30 });
    expect(slow.body.status).toBe('replied');
    expect(await runsOf(keel, id)).toHaveLength(1);
    await eventually(() => closed(keel, id), 30_000, 'the idle close');
  });
});

describe('a message at the instant of the close', () => {
  let keel: TestKeel;
  let holding = false;
  let entered: () => void = () => undefined;
  let release: () => void = () => undefined;
  beforeAll(async () => {
    keel = await startTestKeel({
      conversationIdleMs: IDLE_MS,
      // The close is held inside its workflow task: a message sent now reaches Temporal while that task is running.
      activities: (real) => ({
        conversationIdle: async (input) => {
          if (holding) {
            holding = false;
            entered();
            await new Promise<void>((resolve) => (release = resolve));
          }
          return real.conversationIdle(input);
        },
      }),
    });
  });
  afterAll(() => keel.stop());

  it('is answered exactly once, whichever run takes it', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const id = conversationWorkflowId(a, c);
    const closing = new Promise<void>((resolve) => (entered = resolve));
    holding = true;
    expect((await keel.post(a, c, { text: 'before' }, { wait: 30 })).body.status).toBe('replied');
    await closing;

    const messageId = uniqueId('m');
    // Temporal has the message (202: its signal is recorded) while the closing workflow task still runs.
    const sent = await keel.post(a, c, { text: 'at the close', messageId });
    expect(sent.status).toBe(202);
    release();

    const res = await keel.post(a, c, { text: 'at the close', messageId }, { wait: 60 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'replied', reply: { text: 'echo: at the close' } });
    // Exactly once, checked after the conversation has closed again: nothing more can happen to it.
    await eventually(() => closed(keel, id), 30_000, 'the next idle close');
    expect(await turnsOf(keel, id, messageId)).toEqual([{ status: 'replied' }]);
    const { rows } = await keel.pool.query<{ n: string }>(
      "SELECT count(*) AS n FROM messages WHERE conversation_key = $1 AND role = 'assistant' AND text = $2",
      [id, 'echo: at the close'],
    );
    expect(Number(rows[0]!.n)).toBe(1);
    expect(await eventCount(keel, id, 'turn.finished')).toBe(2);
  });
});

describe('a conversation with a delegate out', () => {
  let keel: TestKeel;
  beforeAll(async () => {
    keel = await startTestKeel({ conversationIdleMs: IDLE_MS });
  });
  afterAll(() => keel.stop());

  it('stays open until the result is relayed, closes, and is woken by its next message', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const id = conversationWorkflowId(a, c);
    // Six steps of 800 ms: the delegate outlives the idle time several times over.
    const task = { text: '/work 6 800 long research', historyMode: 'clean' };
    const spawned = await keel.post(a, c, { text: `/tool spawn_delegate ${JSON.stringify(task)}` }, { wait: 30 });
    const delegateId = /spawned delegate (\S+)/.exec(spawned.body.reply?.text ?? '')?.[1];
    expect(delegateId).toBeDefined();

    const relayed = await eventually(
      async () => {
        const { rows } = await keel.pool.query<{ text: string }>(
          "SELECT text FROM messages WHERE conversation_key = $1 AND role = 'assistant' AND text LIKE 'relay: %'",
          [id],
        );
        return rows.length > 0 ? rows : undefined;
      },
      60_000,
      'the relay',
    );
    expect(relayed.map((r) => r.text)).toEqual([`relay: ${delegateId} success: done: long research`]);
    // The run that spawned the delegate is the one that relayed it: it never closed while the delegate was out.
    expect(await runsOf(keel, id)).toHaveLength(1);

    await eventually(() => closed(keel, id), 30_000, 'the idle close after the relay');
    const woken = await keel.post(a, c, { text: 'and now?' }, { wait: 30 });
    expect(woken.body).toMatchObject({ status: 'replied', reply: { text: 'echo: and now?' } });
    expect(await runsOf(keel, id)).toHaveLength(2);
    await eventually(() => quiescent(keel.client, id), 30_000, 'the woken run at rest');
    const { rows } = await keel.pool.query<{ decision: string }>(
      'SELECT decision FROM delegate_admissions WHERE delegate_id = $1',
      [delegateId],
    );
    expect(rows.map((r) => r.decision)).toEqual(['admitted']);
    const relays = await keel.pool.query<{ n: string }>(
      "SELECT count(*) AS n FROM messages WHERE conversation_key = $1 AND role = 'assistant' AND text LIKE 'relay: %'",
      [id],
    );
    expect(Number(relays.rows[0]!.n)).toBe(1);
  });
});
