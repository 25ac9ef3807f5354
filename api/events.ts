import pg from 'pg';
import type { Pool } from '../db/pool';
import { EVENTS_CHANNEL, type ConversationEvent } from '../services/events';

/** What a stream hears: an announcement (a delta, or an id to read up to), or that announcements were lost. */
export interface Subscriber {
  event(e: ConversationEvent): void;
  /** The LISTEN connection dropped: the stream ends, and the client resumes with Last-Event-ID. */
  lost(): void;
}

/**
 * One LISTEN connection of its own (not one of the pool's) for the whole API, fanned out to the live streams by
 * conversation. NOTIFY only wakes a stream up: finished events are read from the table, in id order.
 */
export class EventHub {
  private readonly subscribers = new Map<string, Set<Subscriber>>();
  private client?: Promise<pg.Client>;
  private closed = false;

  constructor(private readonly pool: Pool) {}

  /** Rejects when there is no LISTEN connection to be had (PostgreSQL down, the hub closed, or it dropped at once). */
  async subscribe(key: string, s: Subscriber): Promise<() => void> {
    // A closed hub connects no more: the connection would outlive the API.
    if (this.closed) throw new Error('the events hub is closed');
    const client = this.connect();
    await client;
    // Dropped while this one waited: its lost() went to the others only, so this one would never hear it.
    if (this.client !== client) throw new Error('the LISTEN connection dropped');
    const set = this.subscribers.get(key) ?? new Set<Subscriber>();
    set.add(s);
    this.subscribers.set(key, set);
    return () => {
      set.delete(s);
      if (set.size === 0) this.subscribers.delete(key);
    };
  }

  /**
   * Ends every open stream (its client resumes with Last-Event-ID elsewhere or later) and the LISTEN connection: an
   * open stream would otherwise hold the API's shutdown forever.
   */
  async close(): Promise<void> {
    this.closed = true;
    const client = await this.client?.catch(() => undefined);
    this.client = undefined;
    for (const set of this.subscribers.values()) for (const s of set) s.lost();
    this.subscribers.clear();
    await client?.end().catch(() => undefined);
  }

  private connect(): Promise<pg.Client> {
    this.client ??= (async () => {
      const client = new pg.Client(this.pool.options);
      const lost = () => {
        if (this.client === undefined) return;
        this.client = undefined;
        client.end().catch(() => undefined);
        // Every open stream ends: its client reconnects with Last-Event-ID and misses nothing that was kept.
        for (const set of this.subscribers.values()) for (const s of set) s.lost();
        this.subscribers.clear();
      };
      client.on('notification', (n) => this.dispatch(n.payload));
      client.on('error', lost);
      client.on('end', lost);
      await client.connect();
      await client.query(`LISTEN ${EVENTS_CHANNEL}`);
      return client;
    })().catch((err: unknown) => {
      this.client = undefined;
      throw err;
    });
    return this.client;
  }

  private dispatch(payload: string | undefined): void {
    let event: ConversationEvent;
    try {
      event = JSON.parse(payload ?? '') as ConversationEvent;
    } catch {
      return; // not one of Keel's
    }
    for (const s of this.subscribers.get(event.key) ?? []) s.event(event);
  }
}

/**
 * What a submission waiting for its turn sleeps on (the `sleep` of waitForTurnEnd): it wakes when a turn of the
 * conversation ends (any turn: a steered message joins a turn not known beforehand), after `ms` in case a NOTIFY was
 * lost, or at once when `signal` aborts. In between, nothing is read.
 */
export class TurnEndWake {
  /** A turn ended since the waiter last woke (it was reading meanwhile): its next sleep returns at once. */
  private ended = false;
  private wake?: () => void;
  private listening: 'no' | 'pending' | 'yes' = 'no';
  private unsubscribe?: () => void;
  private closed = false;

  private constructor(
    private readonly hub: EventHub,
    private readonly key: string,
    private readonly signal: AbortSignal,
  ) {}

  /** Subscribed when it resolves, so the waiter's first read comes after it and no later NOTIFY goes unheard. */
  static async open(hub: EventHub, key: string, signal: AbortSignal): Promise<TurnEndWake> {
    const wake = new TurnEndWake(hub, key, signal);
    await wake.listen();
    return wake;
  }

  readonly sleep = async (ms: number): Promise<void> => {
    if (!this.ended && !this.signal.aborted) {
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          this.signal.removeEventListener('abort', done);
          this.wake = undefined;
          resolve();
        };
        const timer = setTimeout(done, ms);
        this.signal.addEventListener('abort', done);
        this.wake = done;
      });
      // A fallback read with the LISTEN connection lost: listen again, so that NOTIFY wakes the waiter from now on
      // (one ending in between is caught by the next fallback read).
      if (this.listening === 'no' && !this.ended && !this.signal.aborted) void this.listen();
    }
    this.ended = false;
  };

  close(): void {
    this.closed = true;
    this.unsubscribe?.();
    this.unsubscribe = undefined;
  }

  private async listen(): Promise<void> {
    this.listening = 'pending';
    try {
      const unsubscribe = await this.hub.subscribe(this.key, {
        event: (e) => {
          if (e.type !== 'turn.finished') return;
          this.ended = true;
          this.wake?.();
        },
        lost: () => {
          this.listening = 'no';
          this.unsubscribe = undefined;
        },
      });
      if (this.closed) return unsubscribe();
      this.unsubscribe = unsubscribe;
      this.listening = 'yes';
    } catch {
      // No LISTEN connection to be had (PostgreSQL down, the API closing): the fallback reads go on meanwhile.
      this.listening = 'no';
    }
  }
}
