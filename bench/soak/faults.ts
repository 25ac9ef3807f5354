import type { ChildProcess } from 'node:child_process';
import { Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type { ApiRing } from './client';
import type { SoakConfig } from './config';
import type { SoakStack } from './stack';

export type FaultKind = 'kill-worker' | 'kill-api' | 'restart-temporal' | 'restart-postgres';

export interface FaultRecord {
  kind: FaultKind;
  plannedAtS: number;
  startedAtS: number;
  /**
   * Until the part was back: a worker's kill until the new worker polls, an API's until it answers /healthz again,
   * Temporal until a worker polls, PostgreSQL until it accepts connections.
   */
  durationMs: number;
  /** A kill's victim: which worker or API (from 1), its pid, and the pid of the process started in its place. */
  target?: { process: 'worker' | 'api'; index: number; pid?: number; newPid?: number };
  /** An API's kill: the soak's requests in flight to it at the kill -9 (they fail, and retry on the next API). */
  inFlight?: number;
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

/**
 * The faults of the load phase, in time order: kill -9 of a worker every `killEverySeconds`, Temporal once,
 * PostgreSQL once, and (when asked) one API's kill -9.
 */
export function planFaults(cfg: SoakConfig): { kind: FaultKind; atS: number }[] {
  const plan: { kind: FaultKind; atS: number }[] = [];
  if (cfg.killEverySeconds > 0)
    for (let t = cfg.killEverySeconds; t < cfg.loadSeconds; t += cfg.killEverySeconds)
      plan.push({ kind: 'kill-worker', atS: t });
  if (cfg.temporalRestartAt >= 0)
    plan.push({ kind: 'restart-temporal', atS: Math.round(cfg.loadSeconds * cfg.temporalRestartAt) });
  if (cfg.postgresRestartAt >= 0)
    plan.push({ kind: 'restart-postgres', atS: Math.round(cfg.loadSeconds * cfg.postgresRestartAt) });
  if (cfg.apiKillAt >= 0) plan.push({ kind: 'kill-api', atS: Math.round(cfg.loadSeconds * cfg.apiKillAt) });
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
  /** The pids the soak itself is killing: their exits are expected. */
  private readonly killing = new Set<number>();
  private stopped = false;

  constructor(
    private readonly stack: SoakStack,
    private readonly ring: ApiRing,
    private readonly t0: number,
    private readonly postgresDownMs: number,
    private readonly log: (line: string) => void,
  ) {
    for (const w of stack.workers()) this.watch(w, 'worker');
    for (const a of stack.apiProcesses()) this.watch(a, 'api');
  }

  private nowS(): number {
    return Math.round((Date.now() - this.t0) / 100) / 10;
  }

  private watch(child: ChildProcess, name: 'worker' | 'api'): void {
    child.once('exit', (code, signal) => {
      if (this.stopped || (child.pid !== undefined && this.killing.has(child.pid))) return;
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
      let started = Date.now();
      const record: Partial<FaultRecord> = {};
      let error: string | undefined;
      try {
        // An API's kill waits for a request to it first: the fault starts when the kill -9 is sent.
        started = (await this.inject(f.kind, record)) ?? started;
      } catch (err) {
        error = err instanceof Error ? err.message : String(err);
      }
      const full: FaultRecord = {
        kind: f.kind,
        plannedAtS: f.atS,
        startedAtS: Math.round((started - this.t0) / 100) / 10,
        durationMs: Date.now() - started,
        ...record,
        ...(error ? { error } : {}),
      };
      this.faults.push(full);
      this.log(`fault ${describeFault(full)}`);
    }
  }

  private async inject(kind: FaultKind, record: Partial<FaultRecord>): Promise<number | undefined> {
    switch (kind) {
      case 'kill-worker':
        await this.killWorker(Math.floor(Math.random() * this.stack.workers().length), record);
        return undefined;
      case 'kill-api':
        return this.killApi(Math.floor(Math.random() * this.stack.apis.length), record);
      case 'restart-temporal':
        await this.stack.restartTemporal();
        return undefined;
      case 'restart-postgres':
        await this.stack.restartPostgres(this.postgresDownMs);
        return undefined;
    }
  }

  /** During the drain: a worker that died by itself (already recorded) is replaced, so the drain can finish. */
  async reviveWorkersIfDead(): Promise<void> {
    const workers = this.stack.workers();
    for (let i = 0; i < workers.length; i++) {
      const w = workers[i]!;
      if (w.exitCode === null && w.signalCode === null) continue;
      this.log(`worker ${i + 1} is dead: starting a new one`);
      await this.killWorker(i, {});
    }
  }

  private async killWorker(i: number, record: Partial<FaultRecord>): Promise<void> {
    const old = this.stack.workers()[i]!;
    if (old.pid !== undefined) this.killing.add(old.pid);
    record.target = { process: 'worker', index: i + 1, ...(old.pid !== undefined ? { pid: old.pid } : {}) };
    await this.stack.killWorker(i);
    const fresh = this.stack.workers()[i]!;
    if (fresh.pid !== undefined) record.target.newPid = fresh.pid;
    this.watch(fresh, 'worker');
    await this.waitForPoller(fresh);
  }

  /**
   * kill -9 of API i while the soak has a request in flight to it (waiting up to 30 s for one to start), then its
   * restart. Returns when the kill was sent.
   */
  private async killApi(i: number, record: Partial<FaultRecord>): Promise<number> {
    if (!this.stack.killApi) throw new Error('this stack cannot kill an API');
    const api = this.stack.apis[i]!;
    const deadline = Date.now() + 30_000;
    while (this.ring.inFlightTo(api) === 0 && Date.now() < deadline) {
      if (!(await this.ring.nextRequestTo(api, deadline - Date.now()))) break;
      // A moment for the request to reach the API (its connection, its body), so the kill meets it being served;
      // one answered that fast does not count, and the next is waited for.
      await new Promise((r) => setTimeout(r, 10));
    }
    const killedAt = Date.now();
    const old = this.stack.apiProcesses()[i]!;
    if (old.pid !== undefined) this.killing.add(old.pid);
    record.inFlight = this.ring.inFlightTo(api);
    record.target = { process: 'api', index: i + 1, ...(old.pid !== undefined ? { pid: old.pid } : {}) };
    await this.stack.killApi(i);
    const fresh = this.stack.apiProcesses()[i]!;
    if (fresh.pid !== undefined) record.target.newPid = fresh.pid;
    this.watch(fresh, 'api');
    return killedAt;
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
          namespace: this.stack.namespace,
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

/** A fault in one line: what, when, which process, how long until back. */
export function describeFault(f: FaultRecord): string {
  const t = f.target;
  const who = t
    ? ` of ${t.process === 'api' ? 'API' : 'worker'} ${t.index} (pid ${t.pid ?? '?'}` +
      `${t.newPid !== undefined ? ` → ${t.newPid}` : ''})`
    : '';
  const inFlight = f.inFlight !== undefined ? `, ${f.inFlight} requests in flight to it` : '';
  return (
    `${f.kind}${who} at ${f.startedAtS}s${inFlight}: back after ${(f.durationMs / 1000).toFixed(1)} s` +
    (f.error ? ` (error: ${f.error})` : '')
  );
}
