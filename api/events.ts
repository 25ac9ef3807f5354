import pg from 'pg';
import { EVENTS_CHANNEL, type ConversationEvent } from '../db/events';
import type { Pool } from '../db/pool';

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

  constructor(private readonly pool: Pool) {}

  async subscribe(key: string, s: Subscriber): Promise<() => void> {
    await this.connect();
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
