import { condition, sleep } from '@temporalio/workflow';

/**
 * The timer that closes an idle conversation, kept across turns: a wait starts it only when none is running, and
 * work that comes does not cancel it. When it fires before the wait's own deadline (it began in an earlier wait), the
 * wait starts another for what is left. A busy conversation so has one timer per `idleMs`, not a timer started and
 * cancelled per turn, and each wait is one condition (a timer with a condition takes a cancellation scope and a race).
 */
export class IdleTimer {
  private running = false;
  private fired = 0;

  constructor(
    private readonly idleMs: number,
    private readonly summary: string,
  ) {}

  /** True once `ready` holds; false when it held at no point in the `idleMs` from now. */
  async wait(ready: () => boolean): Promise<boolean> {
    const deadline = Date.now() + this.idleMs;
    for (;;) {
      if (ready()) return true;
      const left = deadline - Date.now();
      if (left <= 0) return false;
      if (!this.running) this.start(left);
      const round = this.fired;
      await condition(() => ready() || this.fired !== round);
    }
  }

  private start(ms: number): void {
    this.running = true;
    const over = () => {
      this.running = false;
      this.fired++;
    };
    // Cancelled only with the whole workflow, whose own wait reports that.
    void sleep(ms, { summary: this.summary }).then(over, over);
  }
}
