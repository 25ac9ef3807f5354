import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';

type Role = 'worker' | 'api' | 'temporal' | 'postgres';

export interface CpuUsed {
  machineBusyPct: number;
  workerCpuS: number;
  apiCpuS: number;
  /** The Temporal server's (or dev server's) process, when the soak found it among its children. */
  temporalCpuS?: number;
  /** PostgreSQL: scripts/postgres.ts and every process under it (the server and its backends). */
  postgresCpuS?: number;
}

function machineTimes(): { idle: number; total: number } {
  let idle = 0;
  let total = 0;
  for (const c of os.cpus()) {
    idle += c.times.idle;
    total += c.times.user + c.times.nice + c.times.sys + c.times.idle + c.times.irq;
  }
  return { idle, total };
}

interface ProcStat {
  pid: number;
  ppid: number;
  /** Its own CPU seconds, and those of the children it has waited for (the kernel adds them on reaping). */
  ownS: number;
  reapedS: number;
}

/** Every process's parent and CPU times, from /proc (Linux); the clock tick is 100 Hz there. */
async function procStats(): Promise<Map<number, ProcStat>> {
  const out = new Map<number, ProcStat>();
  const pids = (await readdir('/proc')).filter((d) => /^\d+$/.test(d));
  await Promise.all(
    pids.map(async (d) => {
      const text = await readFile(`/proc/${d}/stat`, 'utf8').catch(() => undefined);
      // After the ") " that ends the command name: state is field 0, ppid 1, utime 11, stime 12, cutime 13, cstime 14.
      const f = text?.slice(text.lastIndexOf(') ') + 2).split(' ');
      if (!f) return;
      const pid = Number(d);
      out.set(pid, {
        pid,
        ppid: Number(f[1]),
        ownS: (Number(f[11]) + Number(f[12])) / 100,
        reapedS: (Number(f[13]) + Number(f[14])) / 100,
      });
    }),
  );
  return out;
}

/**
 * The CPU seconds of a process and everything under it: each live process's own, plus what its ended children used
 * (counted in their parent once reaped, so none twice).
 */
function treeSeconds(root: number, stats: Map<number, ProcStat>, children: Map<number, number[]>): number | undefined {
  if (!stats.has(root)) return undefined;
  let total = 0;
  const stack = [root];
  while (stack.length) {
    const s = stats.get(stack.pop()!)!;
    total += s.ownS + s.reapedS;
    stack.push(...(children.get(s.pid) ?? []));
  }
  return total;
}

/** CPU seconds of a process and everything under it (PostgreSQL's backends are its postmaster's children). */
export async function processTreeSeconds(pid: number): Promise<number> {
  const stats = await procStats();
  const children = new Map<number, number[]>();
  for (const s of stats.values()) children.set(s.ppid, [...(children.get(s.ppid) ?? []), s.pid]);
  return treeSeconds(pid, stats, children) ?? 0;
}

/** The Temporal server and PostgreSQL among the soak's own children, told apart by their command lines. */
async function infrastructure(stats: Map<number, ProcStat>): Promise<{ role: Role; pid: number }[]> {
  const mine = [...stats.values()].filter((s) => s.ppid === process.pid);
  const found: { role: Role; pid: number }[] = [];
  for (const s of mine) {
    const argv = (await readFile(`/proc/${s.pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
    // The dev server (`temporal server start-dev`) or the real server (…/temporal-server/<version>/server … start).
    if (argv.includes('start-dev') || argv[0]?.includes('/temporal-server/'))
      found.push({ role: 'temporal', pid: s.pid });
    else if (argv.some((a) => a.endsWith('scripts/postgres.ts'))) found.push({ role: 'postgres', pid: s.pid });
  }
  return found;
}

/**
 * CPU over the load phase, to tell a slow Keel from a busy machine: the whole machine's busy share (other work on it
 * included), the CPU seconds of Keel's worker and API processes, and those of the Temporal server and PostgreSQL,
 * from the sampler's start. A process that ended (a killed worker, a restarted server) counts with its last sample
 * (read every second), so the totals are a slight undercount.
 */
export class CpuSampler {
  private readonly byPid = new Map<number, { role: Role; cpuS: number }>();
  /** What the processes running at the start had used by then (their own start-up), taken off their totals. */
  private readonly before = new Map<number, number>();
  private readonly start = machineTimes();
  private readonly timer: NodeJS.Timeout;
  private sampling: Promise<void>;

  constructor(private readonly processes: () => { role: Role; pid: number | undefined }[]) {
    this.sampling = this.sample().then(() => {
      for (const [pid, p] of this.byPid) this.before.set(pid, p.cpuS);
    });
    this.timer = setInterval(() => {
      // One sample at a time: a slow /proc walk must not overlap the next.
      this.sampling = this.sampling.then(() => this.sample());
    }, 1_000);
  }

  private async sample(): Promise<void> {
    const stats = await procStats().catch(() => new Map<number, ProcStat>());
    const children = new Map<number, number[]>();
    for (const s of stats.values()) children.set(s.ppid, [...(children.get(s.ppid) ?? []), s.pid]);
    const known = this.processes().filter((p): p is { role: Role; pid: number } => p.pid !== undefined);
    for (const { role, pid } of [...known, ...(await infrastructure(stats))]) {
      // A process that just died has no /proc entry any more: its last sample stands.
      const cpuS = treeSeconds(pid, stats, children);
      if (cpuS !== undefined) this.byPid.set(pid, { role, cpuS });
    }
  }

  async stop(): Promise<CpuUsed> {
    clearInterval(this.timer);
    await this.sampling;
    await this.sample();
    const end = machineTimes();
    const total = end.total - this.start.total;
    const busy = total > 0 ? 1 - (end.idle - this.start.idle) / total : 0;
    const all = [...this.byPid].map(([pid, p]) => ({ role: p.role, cpuS: p.cpuS - (this.before.get(pid) ?? 0) }));
    const sum = (role: Role) =>
      Math.round(all.filter((p) => p.role === role).reduce((a, p) => a + p.cpuS, 0) * 10) / 10;
    const has = (role: Role) => all.some((p) => p.role === role);
    return {
      machineBusyPct: Math.round(busy * 100),
      workerCpuS: sum('worker'),
      apiCpuS: sum('api'),
      ...(has('temporal') ? { temporalCpuS: sum('temporal') } : {}),
      ...(has('postgres') ? { postgresCpuS: sum('postgres') } : {}),
    };
  }
}
