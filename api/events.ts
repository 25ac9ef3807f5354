import type { PoolClient } from 'pg';
import { EVENTS_CHANNEL, eventById, type ConversationEvent } from '../db/events';
import type { Pool } from '../db/pool';

type Listener = (e: ConversationEvent) => void;

/**
 * One LISTEN connection for the whole API, fanned out to the live streams by conversation. A stream that misses
 * events (the connection dropped) resumes from its Last-Event-ID on reconnect.
 */
export class EventHub {
  private readonly listeners = new Map<string, Set<Listener>>();
  private client?: Promise<PoolClient>;

  constructor(private readonly pool: Pool) {}

  async subscribe(key: string, listener: Listener): Promise<() => void> {
    await this.connect();
    const set = this.listeners.get(key) ?? new Set<Listener>();
    set.add(listener);
    this.listeners.set(key, set);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(key);
    };
  }

  async close(): Promise<void> {
    const client = await this.client?.catch(() => undefined);
    this.client = undefined;
    client?.release();
  }

  private connect(): Promise<PoolClient> {
    this.client ??= (async () => {
      const client = await this.pool.connect();
      client.on('notification', (n) => void this.dispatch(n.payload));
      client.on('error', () => {
        // The next subscriber listens again on a fresh connection.
        this.client = undefined;
        client.release(true);
      });
      await client.query(`LISTEN ${EVENTS_CHANNEL}`);
      return client;
    })().catch((err: unknown) => {
      this.client = undefined;
      throw err;
    });
    return this.client;
  }

  private async dispatch(payload: string | undefined): Promise<void> {
    if (!payload) return;
    let event = JSON.parse(payload) as ConversationEvent;
    const set = this.listeners.get(event.key);
    if (!set?.size) return;
    // Too large for NOTIFY: announced by id, read from the table.
    if (event.data === null && event.id !== undefined) event = (await eventById(this.pool, event.id).catch(() => undefined)) ?? event;
    for (const listener of set) listener(event);
  }
}
