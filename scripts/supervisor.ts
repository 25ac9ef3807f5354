import type { ChildProcess } from 'node:child_process';

/**
 * What `npm start` and `npm run cluster` share: the parts they started, stopped in reverse order on Ctrl-C (which
 * reaches the whole process group, so each child stops itself and this waits for it), or when a part exits by itself.
 */
export class Supervisor {
  private readonly stops: (() => Promise<void>)[] = [];
  private stopping = false;

  constructor() {
    process.on('SIGINT', () => void this.shutdown(0));
    process.on('SIGTERM', () => void this.shutdown(0));
  }

  /** Stopped on shutdown, after everything added later. */
  onStop(stop: () => Promise<void>): void {
    this.stops.push(stop);
  }

  /** A child whose exit, other than on shutdown, stops everything. */
  watch(child: ChildProcess, what: string): void {
    child.once('exit', (code, signal) => {
      if (this.stopping) return;
      console.error(`keel: ${what} exited (${code ?? signal}); stopping everything`);
      void this.shutdown(1);
    });
  }

  async shutdown(code: number): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    console.log('\nkeel: stopping…');
    for (const stop of this.stops.reverse()) await stop().catch((err: unknown) => console.error(err));
    console.log('keel: stopped.');
    process.exit(code);
  }
}
