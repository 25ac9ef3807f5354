// The conversation workflow's state, without Temporal: its queue of turns and its relay of delegates' results.
import { describe, expect, it } from 'vitest';
import type { QueuedMessage } from '../domain/conversation';
import { DELEGATION, type DelegateFinished } from '../domain/delegation';
import type { MessageMode } from '../domain/messages';
import { ConversationQueue } from '../workflows/conversation-queue';
import { DelegateRelay } from '../workflows/relay';

const msg = (turnId: string, mode: MessageMode = 'queue'): QueuedMessage => ({
  messageId: `m-${turnId}`,
  turnId,
  mode,
});
const ids = (q: ConversationQueue) => q.carried().map((m) => m.turnId);

describe('ConversationQueue', () => {
  it('queues a turn once, whichever path brings it, at the back, the front, or behind earlier interrupts', () => {
    const q = new ConversationQueue([msg('a')]);
    q.enqueue(msg('a'), 'back');
    q.enqueue(msg('b'), 'back');
    q.enqueue(msg('z'), 'front');
    q.enqueue(msg('i1', 'interrupt'), 'after-interrupts');
    q.enqueue(msg('i2', 'interrupt'), 'after-interrupts');
    q.enqueue(msg('b'), 'front');
    expect(ids(q)).toEqual(['i1', 'i2', 'z', 'a', 'b']);
  });

  it('accepts a message with nothing ahead of it, and queues one behind others', () => {
    const q = new ConversationQueue();
    expect(q.place(msg('a'), false)).toEqual({ status: 'accepted', interrupts: false });
    expect(q.place(msg('b'), false)).toEqual({ status: 'queued', interrupts: false });
    // A turn is running: a plain message waits.
    const r = new ConversationQueue();
    expect(r.place(msg('c'), true)).toEqual({ status: 'queued', interrupts: false });
    expect(ids(q)).toEqual(['a', 'b']);
  });

  it('accepts a message whose turn a starting run already took up from PostgreSQL, without queueing it twice', () => {
    const q = new ConversationQueue();
    q.enqueue(msg('a'), 'front');
    expect(q.place(msg('a'), false)).toEqual({ status: 'accepted', interrupts: false });
    expect(ids(q)).toEqual(['a']);
  });

  it("takes up PostgreSQL's open turns in their order of acceptance, those it was handed included", () => {
    const q = new ConversationQueue();
    q.place(msg('b'), false);
    q.place(msg('late'), false);
    const asked: string[] = [];
    q.takeUp([msg('a'), msg('b'), msg('c')], () => asked.push('asked') > 0);
    expect(ids(q)).toEqual(['a', 'b', 'c', 'late']);
    expect(asked).toEqual(['asked']);
    // Each once: handed over again later, nothing is queued twice.
    q.place(msg('c'), false);
    expect(ids(q)).toEqual(['a', 'b', 'c', 'late']);
  });

  it('takes up open turns in front where the patch says no, as older runs did; asks only where it matters', () => {
    const before = new ConversationQueue();
    before.place(msg('a'), false);
    before.takeUp([msg('a'), msg('b')], () => false);
    expect(ids(before)).toEqual(['b', 'a']);
    const same = new ConversationQueue();
    same.place(msg('c'), false);
    same.takeUp([msg('a'), msg('b')], () => {
      throw new Error('asked where both orders agree');
    });
    expect(ids(same)).toEqual(['a', 'b', 'c']);
  });

  it('steers a message into the running turn: handed over once, counted while it waits', () => {
    const q = new ConversationQueue([msg('w')]);
    expect(q.place(msg('s', 'steer'), true)).toEqual({ status: 'accepted', interrupts: false });
    expect([q.length, q.size]).toEqual([1, 2]);
    expect(q.takeSteered().map((m) => m.turnId)).toEqual(['s']);
    expect(q.takeSteered()).toEqual([]);
    expect(q.size).toBe(1);
    // A steer with no turn running is an ordinary message.
    expect(new ConversationQueue().place(msg('t', 'steer'), false)).toEqual({ status: 'accepted', interrupts: false });
  });

  it('puts a steered message the turn did not read in front of the queue when the turn ends', () => {
    const q = new ConversationQueue([msg('w')]);
    q.place(msg('s1', 'steer'), true);
    q.place(msg('s2', 'steer'), true);
    q.endTurn();
    expect(ids(q)).toEqual(['s1', 's2', 'w']);
    expect(q.size).toBe(3);
  });

  it('puts an interrupt next in line, behind earlier interrupts, and says it interrupts the running turn', () => {
    const q = new ConversationQueue([msg('w')]);
    expect(q.place(msg('i1', 'interrupt'), true)).toEqual({ status: 'queued', interrupts: true });
    expect(q.place(msg('i2', 'interrupt'), true)).toEqual({ status: 'queued', interrupts: true });
    expect(ids(q)).toEqual(['i1', 'i2', 'w']);
    // With no turn running there is nothing to interrupt: it waits at the back.
    expect(q.place(msg('i3', 'interrupt'), false)).toEqual({ status: 'queued', interrupts: false });
    expect(ids(q)).toEqual(['i1', 'i2', 'w', 'i3']);
  });

  it('hands out turns in order, then nothing', () => {
    const q = new ConversationQueue([msg('a'), msg('b')]);
    expect([q.next()?.turnId, q.next()?.turnId, q.next()]).toEqual(['a', 'b', undefined]);
    expect(q.length).toBe(0);
  });
});

/** A debounce timer the test fires by hand. */
function manualTimer() {
  const fires: (() => void)[] = [];
  let started = 0;
  return {
    started: () => started,
    fire: async () => {
      fires.shift()?.();
      await new Promise((r) => setImmediate(r));
    },
    debounce: () => {
      started++;
      return new Promise<void>((resolve) => fires.push(resolve));
    },
  };
}

const finished = (delegateId: string): DelegateFinished => ({
  delegateId,
  outcomeVersion: 1,
  transcriptVersion: 1,
  outcomeKind: 'success',
  terminalOwner: 'delegate',
});

describe('DelegateRelay', () => {
  it('hands completion claims to admission once', () => {
    const relay = new DelegateRelay(undefined, manualTimer().debounce);
    expect(relay.hasClaims).toBe(false);
    relay.claim(finished('d1'));
    relay.claim(finished('d2'));
    expect(relay.hasClaims).toBe(true);
    expect(relay.takeClaims().map((c) => c.delegateId)).toEqual(['d1', 'd2']);
    expect([relay.hasClaims, relay.takeClaims()]).toEqual([false, []]);
  });

  it('keeps one set of live delegates, replaced by what admission answers', () => {
    const carried = { liveDelegates: ['d1', 'd2'], pendingResults: [], retriggers: 0 };
    const relay = new DelegateRelay(carried, manualTimer().debounce);
    const live = relay.live;
    relay.admitted([], ['d2', 'd3']);
    expect(relay.live).toBe(live);
    expect([...live]).toEqual(['d2', 'd3']);
  });

  it('relays results that arrive together after one debounce, each result once', async () => {
    const timer = manualTimer();
    const relay = new DelegateRelay(undefined, timer.debounce);
    relay.admitted([], ['d1', 'd2']);
    expect(timer.started()).toBe(0);
    relay.admitted(['d1'], ['d2']);
    relay.admitted(['d1', 'd2'], []);
    expect(timer.started()).toBe(1);
    expect(relay.relayDue).toBe(false);
    await timer.fire();
    expect(relay.relayDue).toBe(true);
    expect(relay.takeDue()).toEqual({ as: 'retrigger', delegateIds: ['d1', 'd2'] });
    expect(relay.relayDue).toBe(false);
    // A later result waits for a debounce of its own.
    relay.admitted(['d3'], []);
    expect([timer.started(), relay.relayDue]).toEqual([2, false]);
  });

  it(`allows ${DELEGATION.retriggersPerUserMessage} retrigger turns per user message, then only notes`, () => {
    const relay = new DelegateRelay(undefined, manualTimer().debounce);
    const relayOne = (id: string) => {
      relay.admitted([id], []);
      return relay.takeDue()?.as;
    };
    const kinds = Array.from({ length: DELEGATION.retriggersPerUserMessage + 2 }, (_, i) => relayOne(`d${i}`));
    expect(kinds).toEqual([...Array<string>(DELEGATION.retriggersPerUserMessage).fill('retrigger'), 'note', 'note']);
    relay.userTurnStarted();
    expect(relayOne('again')).toBe('retrigger');
    expect(relay.takeDue()).toBeUndefined();
  });

  it('hands its state across continue-as-new: a carried result is due at once', () => {
    const carried = { liveDelegates: ['d3'], pendingResults: ['d1', 'd2'], retriggers: 2 };
    const relay = new DelegateRelay(carried, manualTimer().debounce);
    expect(relay.relayDue).toBe(true);
    expect(relay.carried()).toEqual(carried);
    expect(relay.takeDue()).toEqual({ as: 'retrigger', delegateIds: ['d1', 'd2'] });
    relay.admitted(['d4'], []);
    expect(relay.takeDue()).toEqual({ as: 'note', delegateIds: ['d4'] });
    expect(relay.carried()).toEqual({ liveDelegates: [], pendingResults: [], retriggers: 3 });
  });
});
