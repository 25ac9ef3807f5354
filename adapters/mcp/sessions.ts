import type { ToolServerSession } from './client';

/**
 * The worker's live sessions with tool servers, so that a call does not pay for a process start (stdio) or an
 * initialise (HTTP). Small and lazy: a session opens on first use, closes after `idleMs` without a call (an idle
 * agent holds nothing), and the least recently used one closes when the pool is full. A session found closed (its
 * process exited, its connection dropped) is opened again on the next use.
 */
export interface SessionPoolOptions {
  max: number;
  idleMs: number;
}

interface Entry {
  session: Promise<ToolServerSession>;
  idle?: NodeJS.Timeout;
  busy: number;
}

export class ToolSessionPool {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly opts: SessionPoolOptions) {}

  /**
   * Runs `work` on the session under `key` (one per server configuration), opening it with `open` when there is
   * none or it is closed. A session that failed under `work` with `lost` true is closed and forgotten.
   */
  async use<T>(
    key: string,
    open: () => Promise<ToolServerSession>,
    work: (s: ToolServerSession) => Promise<T>,
    lost: (err: unknown) => boolean,
  ): Promise<T> {
    const entry = await this.entry(key, open);
    entry.busy++;
    clearTimeout(entry.idle);
    try {
      return await work(await entry.session);
    } catch (err) {
      if (lost(err)) this.forget(key, entry);
      throw err;
    } finally {
      entry.busy--;
      if (entry.busy === 0 && this.entries.get(key) === entry)
        entry.idle = setTimeout(() => this.forget(key, entry), this.opts.idleMs).unref();
    }
  }

  /** How many sessions are open (for metrics and tests). */
  get size(): number {
    return this.entries.size;
  }

  async closeAll(): Promise<void> {
    const all = [...this.entries.entries()];
    this.entries.clear();
    await Promise.all(all.map(([, e]) => this.close(e)));
  }

  private async entry(key: string, open: () => Promise<ToolServerSession>): Promise<Entry> {
    const existing = this.entries.get(key);
    if (existing) {
      const live = await existing.session.then(
        (s) => !s.closed,
        () => false,
      );
      if (live && this.entries.get(key) === existing) {
        // Most recently used last: Map keeps insertion order.
        this.entries.delete(key);
        this.entries.set(key, existing);
        return existing;
      }
      this.forget(key, existing);
    }
    const entry: Entry = { session: open(), busy: 0 };
    this.entries.set(key, entry);
    // A session that failed to open is not kept: the next use tries again.
    entry.session.catch(() => this.forget(key, entry));
    this.evict();
    return entry;
  }

  private evict(): void {
    for (const [key, e] of this.entries) {
      if (this.entries.size <= this.opts.max) return;
      if (e.busy === 0) this.forget(key, e);
    }
  }

  private forget(key: string, entry: Entry): void {
    if (this.entries.get(key) === entry) this.entries.delete(key);
    void this.close(entry);
  }

  private async close(entry: Entry): Promise<void> {
    clearTimeout(entry.idle);
    await entry.session.then(
      (s) => s.close(),
      () => undefined,
    );
  }
}
