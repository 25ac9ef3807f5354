import { readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import type { CheckResults, CheckRow, Finding } from './checks';
import type { SoakConfig } from './config';
import type { CpuUsed } from './cpu';
import type { FaultRecord, UnexpectedExit } from './faults';

export interface SoakReport {
  startedAt: string;
  finishedAt: string;
  machine: {
    cpus: number;
    cpuModel: string;
    memoryGiB: number;
    platform: string;
    node: string;
    loadAvgStart: number[];
    loadAvgEnd: number[];
  };
  config: SoakConfig;
  /** What it ran against, the command that runs it again, and where its output went. */
  stack: {
    kind: 'dev' | 'cluster';
    topology: string;
    workers: number;
    apis: number;
    command: string;
    reportFile: string;
    resultsFile: string;
  };
  phases: {
    setupS: number;
    loadS: number;
    drainS: number;
    totalS: number;
    drainedInTime: boolean;
    outstandingAtEnd: Record<string, number>;
  };
  faults: FaultRecord[];
  unexpectedExits: UnexpectedExit[];
  /** The error that ended a crashed process, as its stderr in the log file says (with how often it appears). */
  crashMessages: string[];
  workload: {
    conversations: number;
    messagesSent: number;
    messagesAccepted: number;
    /** Submissions that needed more than one try, and what the failed tries got (HTTP status or network). */
    submissionsRetried: number;
    failedTries: Record<string, number>;
    delegateSpawns: number;
    jobsCreated: number;
    jobsPaused: number;
  };
  /** CPU over the load phase: the whole machine's busy share, and the CPU seconds of Keel's processes and its parts. */
  cpu: CpuUsed;
  checks: CheckResults;
  verdict: { lost: number; duplicated: number; unaccepted: number; nondeterministic: number; pass: boolean };
  logFile: string;
}

export function machine(): Pick<SoakReport['machine'], 'cpus' | 'cpuModel' | 'memoryGiB' | 'platform' | 'node'> {
  const cpus = os.cpus();
  return {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round((os.totalmem() / 1024 ** 3) * 10) / 10,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    node: process.version,
  };
}

/**
 * Why a Keel process died by itself: the error line after Node's "Unhandled 'error' event" or Keel's own "… failed:"
 * in the processes' shared log, counted (the log holds every process's stderr, so a pid cannot be told apart).
 */
export async function crashMessages(logFile: string): Promise<string[]> {
  const lines = (await readFile(logFile, 'utf8').catch(() => '')).split('\n');
  const counts = new Map<string, number>();
  lines.forEach((line, i) => {
    if (!/Unhandled '\w+' event|^keel (worker|api) failed:/.test(line)) return;
    const error = lines
      .slice(i, i + 8)
      .find((l) => /^\s*(\w*Error|keel (worker|api) failed:)\b.*\S/.test(l) && !l.includes('Unhandled'));
    const message = (error ?? line).trim();
    counts.set(message, (counts.get(message) ?? 0) + 1);
  });
  return [...counts].map(([m, n]) => (n > 1 ? `${m} (× ${n})` : m));
}

export function verdictLine(r: SoakReport): string {
  const crashes = r.unexpectedExits.length;
  return (
    `${r.verdict.pass ? 'PASS' : 'FAIL'} — lost ${r.verdict.lost}, duplicated ${r.verdict.duplicated}` +
    `${r.verdict.unaccepted ? `, never accepted ${r.verdict.unaccepted}` : ''}` +
    `${r.verdict.nondeterministic ? `, ${r.verdict.nondeterministic} histories do not replay` : ''}` +
    (crashes
      ? `; but ${crashes} Keel process${crashes > 1 ? 'es' : ''} crashed by itself ` +
        '(see "Processes that exited by themselves")'
      : '')
  );
}

/** The checks as a fixed-width table for the terminal. */
export function checksTable(rows: CheckRow[], totals: { lost: number; duplicated: number }): string {
  const cells = [
    ['check', 'expected', 'observed', 'lost', 'duplicated'],
    ...rows.map((r) => [r.check, r.expected, r.observed, String(r.lost), String(r.duplicated)]),
  ];
  cells.push(['total', '', '', String(totals.lost), String(totals.duplicated)]);
  const widths = cells[0]!.map((_, c) => Math.max(...cells.map((row) => row[c]!.length)));
  const line = (row: string[]) =>
    row.map((cell, c) => (c >= 3 ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!))).join(' | ');
  const rule = widths.map((w) => '-'.repeat(w)).join('-+-');
  return [line(cells[0]!), rule, ...cells.slice(1, -1).map(line), rule, line(cells[cells.length - 1]!)].join('\n');
}

const mdEscape = (s: string) => s.replace(/\|/g, '\\|');

function findingsSection(findings: Finding[]): string[] {
  const serious = findings.filter((f) => f.kind !== 'anomaly');
  const notes = findings.filter((f) => f.kind === 'anomaly');
  const out: string[] = [];
  out.push('## Losses and duplicates', '');
  if (serious.length === 0)
    out.push('None: every accepted message, delivery, delegate outcome and job run is accounted for exactly once.', '');
  else {
    out.push('| check | kind | id | detail |', '| --- | --- | --- | --- |');
    for (const f of serious) out.push(`| ${f.check} | ${f.kind} | \`${mdEscape(f.id)}\` | ${mdEscape(f.detail)} |`);
    out.push('');
  }
  out.push('## Other observations', '');
  out.push(
    'Not losses: turns that ended `error`/`skipped` (answered, but not with a reply), ' +
      'delegates that ended other than `success`, job runs booked as `error`, keys the ledger does not know.',
    '',
  );
  if (notes.length === 0) out.push('None.', '');
  else {
    out.push('| check | id | detail |', '| --- | --- | --- |');
    for (const f of notes) out.push(`| ${f.check} | \`${mdEscape(f.id)}\` | ${mdEscape(f.detail)} |`);
    out.push('');
  }
  return out;
}

/** Which worker or API a kill hit, its pid and its replacement's; requests in flight to a killed API. */
function faultTarget(f: FaultRecord): string {
  const t = f.target;
  if (!t) return '';
  const who = `${t.process === 'api' ? 'API' : 'worker'} ${t.index} (${t.pid ?? '?'} → ${t.newPid ?? '?'})`;
  return f.inFlight !== undefined ? `${who}, ${f.inFlight} request${f.inFlight === 1 ? '' : 's'} in flight` : who;
}

/** bench/SOAK.md: what ran, on what, which faults hit when, and every check with expected and observed. */
export function markdown(r: SoakReport): string {
  const c = r.config;
  const s = r.checks.stats;
  const retransmitted = s.retransmissions.map((x) => `\`${x.key}\` × ${x.copies}`).join(', ');
  const lines = [
    r.stack.kind === 'cluster' ? '# Soak under faults: the cluster topology' : '# Soak under faults',
    '',
    `Written by \`${r.stack.command}\` (scripts/soak.ts) on ${r.finishedAt}. Verdict: **${verdictLine(r)}**.`,
    '',
    '## Machine',
    '',
    `- ${r.machine.cpus} × ${r.machine.cpuModel}, ${r.machine.memoryGiB} GiB RAM, ` +
      `${r.machine.platform}, Node ${r.machine.node}`,
    `- load average (1/5/15 min) at start ${r.machine.loadAvgStart.map((n) => n.toFixed(2)).join(' / ')}, ` +
      `at end ${r.machine.loadAvgEnd.map((n) => n.toFixed(2)).join(' / ')}`,
    `- ${r.stack.topology}`,
    '',
    '## Duration',
    '',
    `- setup ${r.phases.setupS} s, load ${r.phases.loadS} s, drain ${r.phases.drainS} s ` +
      `(${
        r.phases.drainedInTime
          ? 'everything settled'
          : `deadline reached with ${JSON.stringify(r.phases.outstandingAtEnd)} outstanding`
      }), total ${r.phases.totalS} s`,
    `- started ${r.startedAt}, finished ${r.finishedAt}`,
    '',
    '## Workload',
    '',
    `- ${c.conversations} conversations × ${c.messagesPerConversation} messages ` +
      '(pairs: `/delay 2500 …` then one queued behind it, every fourth `/fail 1 …`), ' +
      'webhook delivery with a secret',
    `- ${r.workload.delegateSpawns} delegates: ` +
      '`/tool spawn_delegate {"text":"/work 3 300 soak task N","historyMode":"clean"}`, each in its own conversation',
    `- ${r.workload.jobsCreated} jobs \`every ${c.jobIntervalMs} ms\` ` +
      `(floor ${c.jobFloorMs} ms, backoff ${c.jobBackoffMs} ms), webhook delivery; ` +
      `paused at the end of the load (${r.workload.jobsPaused} paused)`,
    `- messages sent ${r.workload.messagesSent} (conversation messages and delegate spawns), ` +
      `accepted ${r.workload.messagesAccepted}; ` +
      `${r.workload.submissionsRetried} submissions needed retries (failed tries: ${
        Object.entries(r.workload.failedTries)
          .map(([k, n]) => `${k} × ${n}`)
          .join(', ') || 'none'
      })`,
    `- turn latency from acceptance to end: p50 ${s.turnLatencyS.p50.toFixed(1)} s, ` +
      `p95 ${s.turnLatencyS.p95.toFixed(1)} s, max ${s.turnLatencyS.max.toFixed(1)} s; the slowest:`,
    ...s.slowestTurns.map((x) => `  - \`${x.message}\` ${x.latencyS.toFixed(1)} s: ${x.timeline}`),
    `- CPU during the load: the machine ${r.cpu.machineBusyPct}% busy (all processes, the soak's and others'), ` +
      `Keel's workers ${r.cpu.workerCpuS} CPU-s and API${r.stack.apis > 1 ? 's' : ''} ${r.cpu.apiCpuS} CPU-s` +
      (r.cpu.temporalCpuS !== undefined ? `, the Temporal server ${r.cpu.temporalCpuS} CPU-s` : '') +
      (r.cpu.postgresCpuS !== undefined ? `, PostgreSQL ${r.cpu.postgresCpuS} CPU-s` : '') +
      ` in ${r.phases.loadS} s`,
    `- job fires skipped, by reason: ${
      Object.entries(s.skipReasons)
        .map(([k, n]) => `${k} × ${n}`)
        .join('; ') || 'none'
    }`,
    '',
    'Reading the latencies and skips: after a kill -9, an activity that was running on the dead worker ' +
      'is retried only when Temporal times it out — ' +
      'after its heartbeat timeout (model calls 10 s, job turns 30 s) or, for activities without heartbeats, ' +
      'its start-to-close timeout ' +
      '(PostgreSQL steps and deliveries 20 s; workflows/activities.ts). ' +
      'A job whose run is held up that way records the fires meanwhile as skipped ' +
      '("the previous run was still running"), and a backlog of fires started out of order ' +
      'records the older ones as "a later fire has already run".',
    '',
    '## Faults injected',
    '',
    '| # | fault | process (pid → its replacement) | planned (s) | started (s) | back after (s) | error |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...r.faults.map(
      (f, i) =>
        `| ${i + 1} | ${f.kind} | ${faultTarget(f)} | ${f.plannedAtS} | ${f.startedAtS} | ` +
        `${(f.durationMs / 1000).toFixed(1)} | ${f.error ? mdEscape(f.error) : ''} |`,
    ),
    '',
    `Kills: ${r.faults.filter((f) => f.kind === 'kill-worker').length} ` +
      `(kill -9 of ${r.stack.workers > 1 ? 'a random worker' : 'the worker'}, then a new one; ` +
      '"back" = it polls again). ' +
      (c.apiKillAt >= 0
        ? `API kills: ${r.faults.filter((f) => f.kind === 'kill-api').length} (kill -9 of a random API as soon as a ` +
          'request to it is in flight, then the same API started again on its port; "back" = it answers /healthz ' +
          "and a worker polls; the soak's calls take the APIs in turn, so a try that fails on the dead API is " +
          'retried on the next). '
        : '') +
      `Temporal restarts: ${r.faults.filter((f) => f.kind === 'restart-temporal').length}. ` +
      `PostgreSQL restarts: ${r.faults.filter((f) => f.kind === 'restart-postgres').length} ` +
      `(down ${c.postgresDownMs} ms).`,
    '',
    '### Processes that exited by themselves',
    '',
    ...(r.unexpectedExits.length
      ? [
          ...r.unexpectedExits.map(
            (e) =>
              `- the ${e.process} (pid ${e.pid}) at ${e.atS} s${e.duringFault ? `, during ${e.duringFault}` : ''}: ` +
              `exit code ${e.code}, signal ${e.signal}`,
          ),
          ...(r.crashMessages.length
            ? ['', 'The errors that ended them, from the log:', '', ...r.crashMessages.map((m) => `- \`${m}\``)]
            : []),
          '',
          'The soak replaces a dead worker at its next scheduled kill -9 (or, during the drain, at once), ' +
            'as a process supervisor would: ' +
            'so a crash costs time here, not work; ' +
            'without a supervisor the worker stays down until restarted by hand. A crashed API is not replaced.',
        ]
      : ['None.']),
    '',
    '## Checks',
    '',
    '| check | expected | observed | lost | duplicated |',
    '| --- | --- | --- | --- | --- |',
    ...r.checks.rows.map(
      (row) =>
        `| ${mdEscape(row.check)} | ${mdEscape(row.expected)} | ${mdEscape(row.observed)} | ` +
        `${row.lost} | ${row.duplicated} |`,
    ),
    `| **total** | | | **${r.checks.lost}** | **${r.checks.duplicated}** |`,
    '',
    'How each is checked (PostgreSQL is read directly after the drain):',
    '',
    '- (a) each accepted message (and any Keel recorded without the client seeing a 2xx) has an `inbound_messages` ' +
      'row whose turn ended (`replied`, `skipped`, `error`, `interrupted`), exactly one `turns` row names it, ' +
      'and a reply has the expected text.',
    '- (b) each webhook row of the `deliveries` ledger is `delivered` ' +
      'and its `idempotency-key` reached the receiver; ' +
      'every replied turn and ok job run with a result has a ledger row; ' +
      "no reply (a message's answer, a delegate's relay, a job run's result) arrived under two distinct keys. " +
      'The same key arriving again is a retransmission: ' +
      'allowed by design (the window between the send and the ledger write), reported below.',
    '- (c) each spawn claimed one delegate; its outcome is committed, admitted once (`delegate_admissions`), ' +
      '`relay = relayed`, named by exactly one retrigger turn that replied, and that reply was received.',
    '- (d) no job run is left `running`; every Schedule fire (the larger of its `numActionsTaken` and the run ' +
      "workflows Temporal's visibility lists as started by it) has a `job_runs` row; " +
      'every ok run has the expected result, `delivered`, and its key was received; a run attempt has one turn.',
    '- (e) the agent ran with budgets set (daily, monthly, per turn, per delegate tree, per job run); every model ' +
      'call of a turn, delegate or job that answered (`model_calls`, written with the answer) is settled exactly ' +
      "once in `model_spend` with the same tokens and the price table's cost, no hold is left after the drain, " +
      'and the total is within the daily budget.',
    '',
    `Webhook requests: ${s.webhookRequests}, distinct keys ${s.webhookKeys}, ` +
      `invalid signatures ${s.invalidSignatures}. ` +
      `Retransmissions (same key again): ${s.retransmissions.length}` +
      (s.retransmissions.length ? ` — ${retransmitted}` : '') +
      '.',
    '',
    `Turn statuses: ${JSON.stringify(s.turnStatus)}. Delegate outcomes: ${JSON.stringify(s.delegateOutcomes)}. ` +
      `Job runs: ${JSON.stringify(s.jobRuns)} for ${s.scheduleActions} Schedule fires` +
      ` (${s.missedCatchupWindow} missed the catch-up window).`,
    '',
    ...findingsSection(r.checks.findings),
    '## Reproduce',
    '',
    '```sh',
    'npm ci',
    `SOAK_SECONDS=${c.loadSeconds} ${r.stack.command}   ` +
      '# knobs: SOAK_CONVERSATIONS, SOAK_MESSAGES, SOAK_JOBS, SOAK_DELEGATES, SOAK_KILL_EVERY_S, ' +
      'SOAK_DRAIN_SECONDS, …',
    '```',
    '',
    `The processes' logs went to \`${r.logFile}\` (git-ignored); ` +
      `machine-readable results are in \`${r.stack.resultsFile}\`.`,
    '',
  ];
  return lines.join('\n');
}

export async function writeReports(r: SoakReport, mdPath: string, jsonPath: string): Promise<void> {
  await writeFile(mdPath, markdown(r));
  await writeFile(jsonPath, `${JSON.stringify(r, null, 2)}\n`);
}
