import os from 'node:os';
import { cpuSeconds } from '../../scripts/keel-stack';

type Role = 'worker' | 'api';

function machineTimes(): { idle: number; total: number } {
  let idle = 0;
  let total = 0;
  for (const c of os.cpus()) {
    idle += c.times.idle;
    total += c.times.user + c.times.nice + c.times.sys + c.times.idle + c.times.irq;
  }
  return { idle, total };
}

/**
 * CPU over the load phase, to tell a slow Keel from a busy machine: the whole machine's busy share (other work on it
 * included) and the CPU seconds of Keel's worker and API processes. A killed worker's CPU is its last sample (read
 * every second), so the worker's total is a slight undercount.
 */
export class CpuSampler {
  private readonly byPid = new Map<number, { role: Role; cpuS: number }>();
  private readonly start = machineTimes();
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly processes: () => { role: Role; pid: number | undefined }[]) {
    this.timer = setInterval(() => void this.sample(), 1_000);
  }

  private async sample(): Promise<void> {
    for (const { role, pid } of this.processes()) {
      if (pid === undefined) continue;
      // A process that just died has no /proc entry any more: its last sample stands.
      const cpuS = await cpuSeconds(pid).catch(() => undefined);
      if (cpuS !== undefined) this.byPid.set(pid, { role, cpuS });
    }
  }

  async stop(): Promise<{ machineBusyPct: number; workerCpuS: number; apiCpuS: number }> {
    clearInterval(this.timer);
    await this.sample();
    const end = machineTimes();
    const total = end.total - this.start.total;
    const busy = total > 0 ? 1 - (end.idle - this.start.idle) / total : 0;
    const sum = (role: Role) =>
      Math.round([...this.byPid.values()].filter((p) => p.role === role).reduce((a, p) => a + p.cpuS, 0) * 10) / 10;
    return { machineBusyPct: Math.round(busy * 100), workerCpuS: sum('worker'), apiCpuS: sum('api') };
  }
}
