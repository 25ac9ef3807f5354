import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { publishEvent } from '../db/events';
import { inTransaction } from '../db/pool';
import { conversationWorkflowId } from '../domain/ids';
import { eventually, settledHistory, startTestKeel, uniqueId, type TestKeel } from './support/keel';

let keel: TestKeel;
let base: string;
beforeAll(async () => {
  keel = await startTestKeel();
  base = await keel.api.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => keel?.stop());

interface SseEvent {
  id?: number;
  event: string;
  data: Record<string, unknown>;
}

/**
 * Opens a Server-Sent Events stream; resolves once the server answered (it subscribes before it answers), and gives a
 * function that reads events until `until` holds for what arrived.
 */
async function openEvents(url: string, headers: Record<string, string> = {}) {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 30_000);
  const res = await fetch(url, { headers, signal: abort.signal });
  expect(res.headers.get('content-type')).toBe('text/event-stream');
  return {
    async until(done: (events: SseEvent[]) => boolean): Promise<SseEvent[]> {
      const events: SseEvent[] = [];
      const decoder = new TextDecoder();
      let buffer = '';
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          buffer += decoder.decode(chunk, { stream: true });
          for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const fields = Object.fromEntries(
              block
                .split('\n')
                .filter((l) => !l.startsWith(':'))
                .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 2)]),
            );
            if (!fields.event) continue;
            events.push({
              ...(fields.id ? { id: Number(fields.id) } : {}),
              event: fields.event,
              data: JSON.parse(fields.data ?? '{}') as Record<string, unknown>,
            });
          }
          if (done(events)) break;
        }
      } finally {
        clearTimeout(timer);
        abort.abort();
      }
      return events;
    },
  };
}

const readEvents = async (url: string, done: (events: SseEvent[]) => boolean, headers: Record<string, string> = {}) =>
  (await openEvents(url, headers)).until(done);

const { EventType } = temporal.api.enums.v1;
/** Workflow task events follow the machine's load (a sticky task that waited 3 s times out and is scheduled again). */
const WORKFLOW_TASK_EVENTS = new Set([
  EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
  EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
  EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
  EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
  EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
]);

/**
 * The encoded bytes of a history's events, but for its workflow task events and the last failure an activity's
 * started event carries after a retry (a heartbeat missed under load): what the turns themselves recorded.
 */
async function historyBytes(workflowId: string): Promise<number> {
  const { events } = await settledHistory(keel, workflowId);
  return (events ?? [])
    .filter((e) => !WORKFLOW_TASK_EVENTS.has(e.eventType ?? EventType.EVENT_TYPE_UNSPECIFIED))
    .map((e) => {
      const started = e.activityTaskStartedEventAttributes;
      return started ? { ...e, activityTaskStartedEventAttributes: { ...started, lastFailure: null, attempt: 1 } } : e;
    })
    .reduce((bytes, e) => bytes + temporal.api.history.v1.HistoryEvent.encode(e).finish().length, 0);
}

describe('live events of a conversation', () => {
  it('text.delta events precede turn.finished in a /delay turn; resuming from Last-Event-ID has no gaps', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const url = `${base}/v1/agents/${a}/conversations/${c}/events`;
    const finished = (events: SseEvent[]) => events.some((e) => e.event === 'turn.finished');
    const stream = await openEvents(url);
    expect((await keel.post(a, c, { text: '/delay 2000 one two three four five six seven eight' })).status).toBe(202);
    const events = await stream.until(finished);

    const types = events.map((e) => e.event);
    expect(types[0]).toBe('turn.started');
    const firstDelta = types.indexOf('text.delta');
    expect(firstDelta).toBeGreaterThan(0);
    expect(firstDelta).toBeLessThan(types.indexOf('turn.finished'));
    expect(events.filter((e) => e.event === 'text.delta').length).toBeGreaterThan(1);
    expect(
      events
        .filter((e) => e.event === 'text.delta')
        .map((e) => e.data.delta)
        .join(''),
    ).toContain('echo: one two three');
    expect(types).toContain('reply.delivered');
    expect(events.find((e) => e.event === 'turn.finished')?.data).toMatchObject({ status: 'replied' });
    // Kept events have increasing ids; deltas have none.
    const ids = events.filter((e) => e.id !== undefined).map((e) => e.id!);
    expect(ids).toEqual([...ids].sort((x, y) => x - y));
    expect(events.filter((e) => e.event === 'text.delta').every((e) => e.id === undefined)).toBe(true);

    // Reconnecting after the first event gets every later finished event, and only those.
    const resumed = await readEvents(url, finished, { 'last-event-id': String(ids[0]) });
    expect(resumed.map((e) => e.id)).toEqual(ids.slice(1));
  });

  it('when the API loses its LISTEN connection the stream ends; a Last-Event-ID reconnect misses nothing', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const url = `${base}/v1/agents/${a}/conversations/${c}/events`;
    await keel.post(a, c, { text: 'first' }, { wait: 30 });
    const stream = await openEvents(url);
    // Reads until the server ends the stream; the connection is dropped only once the stream has delivered what was
    // there when it opened (under load, a drop that came first ended the stream before its backlog was read).
    let delivered!: () => void;
    const backlogRead = new Promise<void>((resolve) => (delivered = resolve));
    const ending = stream.until((es) => {
      if (es.some((e) => e.event === 'turn.finished')) delivered();
      return false;
    });
    await backlogRead;
    const first = await eventually(async () => {
      const { rows } = await keel.pool.query<{ id: string }>(
        'SELECT max(id) AS id FROM conversation_events WHERE conversation_key = $1',
        [conversationWorkflowId(a, c)],
      );
      return rows[0]?.id ? Number(rows[0].id) : undefined;
    });
    // PostgreSQL drops the hub's connection (as a restart would).
    await keel.pool.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
        WHERE query = 'LISTEN keel_events' AND pid <> pg_backend_pid()`,
    );
    const before = await ending;
    expect(before.filter((e) => e.event === 'turn.finished')).toHaveLength(1);
    // Meanwhile a turn happens; the reconnect gets it, from the last id it saw.
    await keel.post(a, c, { text: 'second' }, { wait: 30 });
    const after = await readEvents(url, (es) => es.some((e) => e.event === 'turn.finished'), {
      'last-event-id': String(first),
    });
    expect(after.map((e) => e.event)).toEqual(['turn.started', 'reply.delivered', 'turn.finished']);
    expect(after.every((e) => e.id! > first)).toBe(true);
  });

  it('an event too large for NOTIFY reaches an open stream whole, in id order with the events around it', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const key = conversationWorkflowId(a, c);
    await keel.post(a, c, { text: 'first' }, { wait: 30 });
    const stream = await openEvents(`${base}/v1/agents/${a}/conversations/${c}/events`);
    const big = 'x'.repeat(9_000);
    // Three events in their own transactions, as three steps would publish them: small, over NOTIFY's 8000 bytes,
    // small. The middle one is announced by id alone and read from the table.
    for (const [i, data] of [{ n: 1 }, { n: 2, big }, { n: 3 }].entries())
      await inTransaction(keel.pool, (db) => publishEvent(db, key, 'delegate.finished', ['probe', i], data));
    const events = await stream.until((es) => es.some((e) => e.data.n === 3));
    const probes = events.filter((e) => e.event === 'delegate.finished');
    expect(probes.map((e) => e.data)).toEqual([{ n: 1 }, { n: 2, big }, { n: 3 }]);
    expect(probes.map((e) => e.id)).toEqual([...probes.map((e) => e.id!)].sort((x, y) => x - y));
  });

  it('tool calls and delegates appear as events too', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    await keel.post(a, c, { text: '/tool spawn_delegate {"text":"quick job","historyMode":"clean"}' }, { wait: 30 });
    const events = await readEvents(`${base}/v1/agents/${a}/conversations/${c}/events`, (es) =>
      es.some((e) => e.event === 'delegate.finished'),
    );
    expect(events.map((e) => e.event)).toEqual(
      expect.arrayContaining(['turn.started', 'tool.called', 'reply.delivered', 'turn.finished', 'delegate.finished']),
    );
  });

  it('streaming does not grow the history: a streamed turn adds the bytes of one that is not, within 10%', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const id = conversationWorkflowId(a, c);
    await keel.post(a, c, { text: 'warm up one two three four five six seven eight' }, { wait: 30 });
    const before = await historyBytes(id);
    await keel.post(a, c, { text: 'plain one two three four five six seven eight' }, { wait: 30 });
    const plain = (await historyBytes(id)) - before;
    await keel.post(a, c, { text: '/delay 1500 one two three four five six seven eight' }, { wait: 30 });
    const streamed = (await eventually(async () => historyBytes(id), 5_000)) - before - plain;
    expect(Math.abs(streamed - plain) / plain).toBeLessThan(0.1);
  });
});
