/**
 * `npm run soak`: Keel under faults, bounded in time and count, on loopback only. It starts Keel's parts as separate
 * processes (scripts/keel-stack.ts) and a local webhook receiver, then for SOAK_SECONDS (210 by default) runs 50
 * conversations, 20 jobs and 10 delegates while the worker is killed with kill -9 every 20 s, the Temporal dev server
 * is restarted once (at 35%) and PostgreSQL once (at 65%). A drain waits until everything accepted has ended, then
 * the checks read PostgreSQL, the receiver's log and the Schedules: every accepted message answered once, every
 * webhook delivery received (no reply under two keys), every delegate committed and relayed once, every job run
 * booked. Writes bench/SOAK.md and bench/soak-results.json; exit 0 only with zero lost and zero duplicated.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { runChecks, outstanding, scheduleActions, type ScheduleActions } from '../bench/soak/checks';
import { soakConfig } from '../bench/soak/config';
import { CpuSampler } from '../bench/soak/cpu';
import { FaultInjector, planFaults } from '../bench/soak/faults';
import { checksTable, crashMessages, machine, verdictLine, writeReports, type SoakReport } from '../bench/soak/report';
import { createJobs, pauseJobs, planMessages, sendMessages, type WebhookTarget } from '../bench/soak/workload';
import { createPool } from '../db/pool';
import { startWebhookReceiver } from '../test/support/webhook-receiver';
import { bundleWorkflows } from '../worker/bundle';
import { startKeelStack, type KeelStack } from './keel-stack';
import { REPO_ROOT } from './processes';

const SECRET = 'soak-secret';
const BENCH = path.join(REPO_ROOT, 'bench');
const LOG_FILE = path.join(BENCH, 'soak.log');

const t = { start: Date.now() };
const log = (line: string) => console.log(`[soak +${((Date.now() - t.start) / 1000).toFixed(1)}s] ${line}`);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const seconds = (ms: number) => Math.round(ms / 100) / 10;
const noop = () => undefined;

async function main(): Promise<number> {
  const cfg = soakConfig();
  const startedAt = new Date();
  const loadAvgStart = os.loadavg();
  await writeFile(LOG_FILE, '');
  log(
    `soak: ${cfg.loadSeconds} s of load, ${cfg.conversations} conversations × ${cfg.messagesPerConversation}, ` +
      `${cfg.jobs} jobs, ${cfg.delegates} delegates; logs in ${path.relative(REPO_ROOT, LOG_FILE)}`,
  );

  // One workflow bundle for every worker start: a kill then costs a process start, not a webpack build.
  const workDir = await mkdtemp(path.join(os.tmpdir(), 'keel-soak-'));
  const receiver = await startWebhookReceiver({ secret: SECRET, failFirst: cfg.receiverRefuseFirst, failStatus: 404 });
  let stack: KeelStack | undefined;
  let injector: FaultInjector | undefined;
  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    injector?.quiet();
    await stack?.stop().catch((err: unknown) => console.error('soak: stopping the stack failed:', err));
    await receiver.close().catch(noop);
    await rm(workDir, { recursive: true, force: true });
  };
  // Ctrl-C or a CI timeout: stop every process the stack started, leaving no orphans behind.
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      log(`${sig}: stopping`);
      void cleanup().finally(() => process.exit(130));
    });
  }

  try {
    const bundlePath = path.join(workDir, 'workflow-bundle.js');
    await writeFile(bundlePath, await bundleWorkflows());
    log('workflow bundle built; starting Temporal, PostgreSQL, worker and API');
    stack = await startKeelStack({
      logFile: LOG_FILE,
      env: {
        KEEL_JOB_EVERY_FLOOR_MS: String(cfg.jobFloorMs),
        KEEL_JOB_BACKOFF_MS: cfg.jobBackoffMs,
        KEEL_WORKFLOW_BUNDLE: bundlePath,
      },
    });
    const api = stack.api;
    log(`stack up in ${stack.dataDir}: API ${api}, Temporal ${stack.temporalAddress}, receiver ${receiver.url}`);
    const target: WebhookTarget = { channel: 'webhook', url: receiver.url, secret: SECRET };

    // Jobs first, before any fault: their count is part of the workload, not of what a fault may lose.
    const jobs = await createJobs(api, cfg, target, Date.now() + 120_000);
    log(`${jobs.length} jobs created (every ${cfg.jobIntervalMs} ms)`);
    const setupMs = Date.now() - t.start;

    const t0 = Date.now();
    const loadEnd = t0 + cfg.loadSeconds * 1000;
    const drainDeadline = loadEnd + cfg.drainSeconds * 1000;
    const messages = planMessages(cfg);
    injector = new FaultInjector(stack, t0, cfg.postgresDownMs, log);
    const keel = stack;
    const cpu = new CpuSampler(() => [
      { role: 'worker', pid: keel.worker().pid },
      { role: 'api', pid: keel.apiProcess().pid },
    ]);
    const sending = sendMessages(api, cfg.agentId, target, messages, t0, drainDeadline);
    const faults = injector.run(planFaults(cfg), loadEnd);
    const ticker = setInterval(() => {
      const accepted = messages.filter((m) => m.acceptedAtS !== undefined).length;
      const due = messages.filter((m) => m.plannedAtS * 1000 <= Date.now() - t0).length;
      log(
        `load: ${accepted}/${due} due messages accepted, ${receiver.received.length} webhooks received, ` +
          `${injector?.faults.length ?? 0} faults so far`,
      );
    }, 15_000);
    await faults;
    injector.attributeExits();
    await sleep(loadEnd - Date.now());
    clearInterval(ticker);
    const cpuUsed = await cpu.stop();
    await pauseJobs(api, cfg.agentId, jobs, drainDeadline);
    log(
      `load phase over; ${jobs.filter((j) => j.pauseStatus === 200 || j.pauseStatus === 409).length}/${jobs.length} ` +
        `jobs paused; draining (deadline ${cfg.drainSeconds} s)`,
    );

    // The drain: poll until nothing accepted is still open (twice in a row), or the deadline.
    const drainStart = Date.now();
    const connection = await Connection.connect({ address: stack.temporalAddress });
    const client = new Client({ connection });
    const pool = createPool(stack.databaseUrl);
    let actions = new Map<string, ScheduleActions>();
    let last: Record<string, number> = {};
    let clean = 0;
    let lastPrint = 0;
    let sendingDone = false;
    void sending.then(() => (sendingDone = true));
    try {
      for (;;) {
        try {
          await injector.reviveWorkerIfDead();
          actions = await scheduleActions(client, jobs);
          last = await outstanding(pool, cfg.agentId, messages, jobs, actions);
          const open = Object.values(last).reduce((a, b) => a + b, 0) + (sendingDone ? 0 : 1);
          clean = open === 0 ? clean + 1 : 0;
        } catch (err) {
          clean = 0;
          log(`drain: poll failed (${err instanceof Error ? err.message : String(err)}); trying again`);
        }
        if (clean >= 2 || Date.now() > drainDeadline) break;
        if (Date.now() - lastPrint > 10_000) {
          lastPrint = Date.now();
          log(`drain: outstanding ${JSON.stringify(last)}`);
        }
        await sleep(2_000);
      }
      const drainedInTime = clean >= 2;
      const drainMs = Date.now() - drainStart;
      log(
        drainedInTime
          ? `drained in ${seconds(drainMs)} s`
          : `drain deadline reached with ${JSON.stringify(last)} outstanding`,
      );

      const checks = await runChecks({
        pool,
        agentId: cfg.agentId,
        messages,
        jobs,
        received: receiver.received,
        actions,
      });
      const failedTries: Record<string, number> = {};
      for (const m of messages)
        for (const tr of m.tries.slice(0, -1)) failedTries[String(tr)] = (failedTries[String(tr)] ?? 0) + 1;
      const unaccepted = checks.findings.filter((f) => f.kind === 'unaccepted').length;
      const report: SoakReport = {
        startedAt: startedAt.toISOString(),
        finishedAt: new Date().toISOString(),
        machine: { ...machine(), loadAvgStart, loadAvgEnd: os.loadavg() },
        config: cfg,
        phases: {
          setupS: seconds(setupMs),
          loadS: seconds(drainStart - t0),
          drainS: seconds(drainMs),
          totalS: seconds(Date.now() - t.start),
          drainedInTime,
          outstandingAtEnd: last,
        },
        faults: injector.faults,
        unexpectedExits: injector.unexpectedExits,
        crashMessages: await crashMessages(LOG_FILE),
        cpu: cpuUsed,
        workload: {
          conversations: cfg.conversations + cfg.delegates,
          messagesSent: messages.filter((m) => m.sentAtS !== undefined).length,
          messagesAccepted: messages.filter((m) => m.acceptedAtS !== undefined).length,
          submissionsRetried: messages.filter((m) => m.tries.length > 1).length,
          failedTries,
          delegateSpawns: messages.filter((m) => m.kind === 'delegate').length,
          jobsCreated: jobs.filter((j) => j.id).length,
          jobsPaused: jobs.filter((j) => j.pauseStatus === 200 || j.pauseStatus === 409).length,
        },
        checks,
        verdict: {
          lost: checks.lost,
          duplicated: checks.duplicated,
          unaccepted,
          pass: checks.lost === 0 && checks.duplicated === 0 && unaccepted === 0,
        },
        logFile: path.relative(REPO_ROOT, LOG_FILE),
      };
      await writeReports(report, path.join(BENCH, 'SOAK.md'), path.join(BENCH, 'soak-results.json'));
      console.log(`\n${checksTable(checks.rows, checks)}\n`);
      for (const f of checks.findings.filter((x) => x.kind !== 'anomaly'))
        console.log(`${f.kind.toUpperCase()} [${f.check}] ${f.id}: ${f.detail}`);
      const notes = checks.findings.filter((x) => x.kind === 'anomaly');
      if (notes.length) console.log(`${notes.length} other observations (not losses) are listed in bench/SOAK.md`);
      console.log(
        `faults: ${injector.faults.length} (${injector.faults.map((f) => `${f.kind}@${f.startedAtS}s`).join(', ')})`,
      );
      for (const e of injector.unexpectedExits) {
        console.log(
          `CRASH: the ${e.process} (pid ${e.pid}) exited by itself at ${e.atS} s` +
            `${e.duringFault ? ` during ${e.duringFault}` : ''} (code ${e.code}, signal ${e.signal})`,
        );
      }
      for (const m of report.crashMessages) console.log(`  from the log: ${m}`);
      console.log(`verdict: ${verdictLine(report)}; report in bench/SOAK.md`);
      return report.verdict.pass ? 0 : 1;
    } finally {
      await pool.end().catch(noop);
      await connection.close().catch(noop);
    }
  } finally {
    await cleanup();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error('soak failed:', err);
    process.exit(2);
  },
);
