import type { ChildProcess } from 'node:child_process';
import { Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type { KeelStack } from '../../scripts/keel-stack';
import type { SoakConfig } from './config';

export type FaultKind = 'kill-worker' | 'restart-temporal' | 'restart-postgres';

export interface FaultRecord {
  kind: FaultKind;
  plannedAtS: number;
  startedAtS: number;
  /**
   * Until the part was back: a kill until the new worker polls, Temporal until a worker polls, PostgreSQL until it
   * accepts connections.
   */
  durationMs: number;
  error?: string;
}

/** A process of the stack that ended without the soak asking for it: always a finding. */
export interface UnexpectedExit {
  process: 'worker' | 'api';
  pid: number | undefined;
  code: number | null;
  signal: string | null;
  atS: number;
  /** The fault under way when it exited, if any. */
  duringFault?: FaultKind;
}

/** The faults of the load phase, in time order: kill -9 every `killEverySeconds`, Temporal once, PostgreSQL once. */
export function planFaults(cfg: SoakConfig): { kind: FaultKind; atS: number }[] {
  const plan: { kind: FaultKind; atS: number }[] = [];
  if (cfg.killEverySeconds > 0)
    for (let t = cfg.killEverySeconds; t < cfg.loadSeconds; t += cfg.killEverySeconds)
      plan.push({ kind: 'kill-worker', atS: t });
  if (cfg.temporalRestartAt >= 0)
    plan.push({ kind: 'restart-temporal', atS: Math.round(cfg.loadSeconds * cfg.temporalRestartAt) });
  if (cfg.postgresRestartAt >= 0)
    plan.push({ kind: 'restart-postgres', atS: Math.round(cfg.loadSeconds * cfg.postgresRestartAt) });
  return plan.sort((a, b) => a.atS - b.atS);
}

/**
 * Runs the faults one after another (never two at once: a worker started while PostgreSQL is down fails its
 * migrations and exits, which would test the harness rather than Keel). A fault whose time has passed while the
 * previous one ran starts right away.
 */
export class FaultInjector {
  readonly faults: FaultRecord[] = [];
  readonly unexpectedExits: UnexpectedExit[] = [];
  /** The worker pid the soak itself is killing: its exit is expected. */
  private killing: number | undefined;
  private stopped = false;

  constructor(
    private readonly stack: KeelStack,
    private readonly t0: number,
    private readonly postgresDownMs: number,
    private readonly log: (line: string) => void,
  ) {
    this.watch(stack.worker(), 'worker');
    this.watch(stack.apiProcess(), 'api');
  }

  private nowS(): number {
    return Math.round((Date.now() - this.t0) / 100) / 10;
  }

  private watch(child: ChildProcess, name: 'worker' | 'api'): void {
    child.once('exit', (code, signal) => {
      if (this.stopped || (name === 'worker' && child.pid === this.killing)) return;
      this.unexpectedExits.push({ process: name, pid: child.pid, code, signal, atS: this.nowS() });
      this.log(`!! the ${name} (pid ${child.pid}) exited by itself: code ${code}, signal ${signal}`);
    });
  }

  /** Which fault each unexpected exit happened during (a fault's record is written when it ends). */
  attributeExits(): void {
    for (const e of this.unexpectedExits) {
      const f = this.faults.find((x) => e.atS >= x.startedAtS && e.atS <= x.startedAtS + x.durationMs / 1000 + 1);
      if (f) e.duringFault = f.kind;
    }
  }

  /** Stop recording exits (the stack is being stopped on purpose). */
  quiet(): void {
    this.stopped = true;
  }

  async run(plan: { kind: FaultKind; atS: number }[], loadEndsAt: number): Promise<void> {
    for (const f of plan) {
      const at = this.t0 + f.atS * 1000;
      if (at >= loadEndsAt) break;
      await new Promise((r) => setTimeout(r, Math.max(0, at - Date.now())));
      const startedAtS = this.nowS();
      const started = Date.now();
      let error: string | undefined;
      try {
        await this.inject(f.kind);
      } catch (err) {
        error = err instanceof Error ? err.message : String(err);
      }
      const record: FaultRecord = {
        kind: f.kind,
        plannedAtS: f.atS,
        startedAtS,
        durationMs: Date.now() - started,
        ...(error ? { error } : {}),
      };
      this.faults.push(record);
      this.log(
        `fault ${f.kind} at ${startedAtS}s: back after ${(record.durationMs / 1000).toFixed(1)} s` +
          (error ? ` (error: ${error})` : ''),
      );
    }
  }

  private async inject(kind: FaultKind): Promise<void> {
    switch (kind) {
      case 'kill-worker':
        return this.killWorker();
      case 'restart-temporal':
        return this.stack.restartTemporal();
      case 'restart-postgres':
        return this.stack.restartPostgres(this.postgresDownMs);
    }
  }

  /** During the drain: a worker that died by itself (already recorded) is replaced, so the drain can finish. */
  async reviveWorkerIfDead(): Promise<void> {
    const w = this.stack.worker();
    if (w.exitCode === null && w.signalCode === null) return;
    this.log('the worker is dead: starting a new one');
    await this.killWorker();
  }

  private async killWorker(): Promise<void> {
    const old = this.stack.worker();
    this.killing = old.pid;
    const restarted = this.stack.killWorker();
    // A worker that already died by itself never emits 'exit' again, and killWorker waits for that event: replay it
    // so the stack starts a new worker (the death itself is recorded by watch()).
    if (old.exitCode !== null || old.signalCode !== null) old.emit('exit', old.exitCode, old.signalCode);
    await restarted;
    const fresh = this.stack.worker();
    this.watch(fresh, 'worker');
    await this.waitForPoller(fresh);
  }

  /**
   * The stack's readiness check passes on the dead worker's poller (Temporal lists pollers for a while after their
   * last poll), so "back" is measured by the new process's own poller identity (`<pid>@<host>`, the SDK default).
   */
  private async waitForPoller(worker: ChildProcess, timeoutMs = 120_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const connection = await Connection.connect({ address: this.stack.temporalAddress });
    try {
      for (;;) {
        const { pollers } = await connection.workflowService.describeTaskQueue({
          namespace: 'default',
          taskQueue: { name: this.stack.taskQueue },
          taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        });
        if (pollers.some((p) => p.identity?.startsWith(`${worker.pid}@`))) return;
        if (worker.exitCode !== null || worker.signalCode !== null)
          throw new Error(`the new worker exited (code ${worker.exitCode}) before it polled`);
        if (Date.now() > deadline) throw new Error(`the new worker did not poll within ${timeoutMs / 1000} s`);
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      await connection.close();
    }
  }
}
