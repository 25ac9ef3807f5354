/**
 * `npm run bench:evals` (issue 30's cost goal): replaying 100 recorded turns takes at most 2× the time of 100 live
 * turns with the scripted model, side by side in one run on one Temporal dev server and PostgreSQL, with the
 * scripted model at zero delay and the SDK's McpServer over streamable HTTP on loopback:
 *
 *   live floor  a fresh conversation of EVALS_TURNS turns (every 5th a read-only MCP call), each POSTed once the one
 *               before it ended, timed from the first POST to the last turn's `turn.finished` event
 *   replay      a replay evaluation of that conversation (POST …/evals, mode replay), timed from its POST until its
 *               GET says it no longer runs (asked every 50 ms); it must finish, pass and make no model call
 *
 * Each round runs the two in turn, so that both see the same machine at the same moments. Writes
 * bench/evals-results.json and the evaluation section of bench/REPORT.md (between its markers); `--report` writes
 * the section again from the last results. EVALS_ROUNDS (default 3), EVALS_TURNS (default 100).
 */
import { randomUUID } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import pg from 'pg';
import { conversationWorkflowId, evalCaseWorkflowId, evalWorkflowId } from '../domain/ids';
import { startKeelStack, type KeelStack } from '../scripts/keel-stack';
import { REPO_ROOT } from '../scripts/processes';
import { startShopHttp } from '../test/support/mcp-shop';
import { AGENT, eventsOf, sleep, submit, text } from './drive';
import { fetchEvents, round } from './measure';
import { replaceReportSection } from './report';

const ROUNDS = Number(process.env.EVALS_ROUNDS ?? 3);
const TURNS = Number(process.env.EVALS_TURNS ?? 100);
const GOAL_RATIO = 2;
const POLL_MS = 50;
/** Turns of the warm-up conversation (and its replay), before the rounds; not counted. */
const WARM_TURNS = 10;
const RESULTS = path.join(REPO_ROOT, 'bench', 'evals-results.json');

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
const { EventType } = temporal.api.enums.v1;

interface EvalView {
  id: string;
  status: 'running' | 'finished' | 'failed';
  summary:
    { cases: number; passed: number; failed: number; costUsd: number; modelCalls: number } | { error: string } | null;
  finishedAt: string | null;
  cases: {
    caseId: string;
    status: string;
    result: { passed: boolean; reasons: string[]; modelCalls: number; latencyMs: number; turns: number } | null;
  }[];
}

/** Where a replay's time went, from its two workflows' histories (milliseconds). */
interface ReplayBreakdown {
  /** POST → the evaluation workflow's start (the API takes the case from PostgreSQL, keeps it, starts the run). */
  postToWorkflowStartMs: number;
  /** The evaluation workflow's start → its case workflow's start. */
  toCaseStartMs: number;
  /** The case workflow, from its start to its close. */
  caseSpanMs: number;
  /** The case workflow's close → the evaluation workflow's close (finishEvaluation included). */
  afterCaseMs: number;
  /** The evaluation's close → the bench's GET seeing it (its polling interval). */
  closeToSeenMs: number;
  activities: number;
  /** Summed over the case workflow's activities: scheduled → started, started → completed. */
  activityQueueMs: number;
  activityRunMs: Record<string, number>;
  /** Summed over the case workflow: a workflow task's scheduled → started, started → completed. */
  workflowTaskQueueMs: number;
  workflowTaskRunMs: number;
  /** The case workflow's time outside its activities: an activity's end → the next one scheduled (a task each). */
  betweenActivitiesMs: number;
  /** runEvalTurn's run time: the mean of the case's first 10 turns, and of its last 10. */
  turnRunFirst10Ms: number;
  turnRunLast10Ms: number;
  /** The sum of the turns' own latencyMs (the replay of their answers, inside runEvalTurn). */
  playMs: number;
}

interface Round {
  conversationId: string;
  liveMs: number;
  replayMs: number;
  ratio: number;
  livePerTurnMs: number;
  replayPerTurnMs: number;
  replay: ReplayBreakdown;
}

interface Results {
  date: string;
  machine: { cores: number; cpu: string; node: string; os: string };
  turns: number;
  toolEvery: number;
  rounds: Round[];
  medianRatio: number;
  goalRatio: number;
  met: boolean;
}

const median = (s: readonly number[]) => {
  const sorted = [...s].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/** Every 5th turn calls the shop's read-only tool; the others are plain text. */
const TOOL_EVERY = 5;
const messageOf = (i: number) => (i % TOOL_EVERY === 0 ? `/tool shop__lookup_order {"orderId":"B${i}"}` : text(i));

async function main(): Promise<void> {
  const started = new Date();
  const logFile = path.join(os.tmpdir(), `keel-bench-evals-${process.pid}.log`);
  console.log(`bench:evals: ${ROUNDS} rounds of ${TURNS} turns; Keel's logs in ${logFile}`);
  const shop = await startShopHttp();
  const stack = await startKeelStack({ logFile });
  try {
    const connection = await Connection.connect({ address: stack.temporalAddress });
    const client = new Client({ connection, dataConverter: stack.dataConverter });
    const put = await fetch(`${stack.api}/v1/agents/${AGENT}/tool-servers/shop`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ url: shop.url }),
    });
    if (put.status !== 201) throw new Error(`PUT tool server: ${put.status} ${await put.text()}`);

    // Warm both paths (the worker's MCP session, the caches, the eval workflows' code) before the first round.
    const warm = await liveConversation(stack, WARM_TURNS);
    await replay(stack, client, warm.conversationId, WARM_TURNS);

    const rounds: Round[] = [];
    for (let r = 1; r <= ROUNDS; r++) {
      const live = await liveConversation(stack, TURNS);
      const replayed = await replay(stack, client, live.conversationId, TURNS);
      const round_: Round = {
        conversationId: live.conversationId,
        liveMs: round(live.ms),
        replayMs: round(replayed.ms),
        ratio: round(replayed.ms / live.ms, 2),
        livePerTurnMs: round(live.ms / TURNS, 2),
        replayPerTurnMs: round(replayed.ms / TURNS, 2),
        replay: replayed.breakdown,
      };
      rounds.push(round_);
      console.log(
        `round ${r}: live ${round_.liveMs} ms (${round_.livePerTurnMs} ms a turn), replay ${round_.replayMs} ms ` +
          `(${round_.replayPerTurnMs} ms a turn): ${round_.ratio}×`,
      );
    }
    const medianRatio = round(median(rounds.map((r) => r.replayMs / r.liveMs)), 2);
    const results: Results = {
      date: started.toISOString(),
      machine: {
        cores: os.cpus().length,
        cpu: os.cpus()[0]?.model ?? '?',
        node: process.version,
        os: `${os.platform()} ${os.release()}`,
      },
      turns: TURNS,
      toolEvery: TOOL_EVERY,
      rounds,
      medianRatio,
      goalRatio: GOAL_RATIO,
      met: medianRatio <= GOAL_RATIO,
    };
    console.log(JSON.stringify(results, null, 2));
    await writeFile(RESULTS, `${JSON.stringify(results, null, 2)}\n`);
    await writeSection(results);
    console.log(summaryLine(results));
  } catch (err) {
    console.error(`bench:evals: Keel's logs are in ${logFile}`);
    throw err;
  } finally {
    await stack.stop();
    await shop.close();
  }
}

const summaryLine = (r: Results) =>
  `bench:evals: replaying ${r.turns} turns took ${r.medianRatio}× the time of ${r.turns} live turns (median of ` +
  `${r.rounds.length} rounds; goal ≤ ${r.goalRatio}×): ${r.met ? 'met' : 'MISSED'}`;

/** A fresh conversation of `turns` turns one after another, each awaited to its end; checks each replied. */
async function liveConversation(stack: KeelStack, turns: number): Promise<{ conversationId: string; ms: number }> {
  const conversationId = `evals-${randomUUID().slice(0, 8)}`;
  const events = await eventsOf(stack, conversationId);
  let ms: number;
  try {
    const t0 = performance.now();
    let end = t0;
    for (let i = 1; i <= turns; i++) {
      const { turnId } = await submit(stack, conversationId, {
        text: messageOf(i),
        messageId: `${conversationId}-${i}`,
      });
      end = await events.awaitTurn(turnId);
    }
    ms = end - t0;
  } finally {
    events.close();
  }
  await checkReplies(stack.databaseUrl, conversationWorkflowId(AGENT, conversationId), turns);
  return { conversationId, ms };
}

/** Every turn replied, and each tool turn with the tool's answer. */
async function checkReplies(databaseUrl: string, conversationKey: string, turns: number): Promise<void> {
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const { rows } = await db.query<{ message_id: string; status: string; text: string | null }>(
      `SELECT t.message_id, t.status, m.text FROM turns t
         LEFT JOIN messages m ON m.conversation_key = t.conversation_key AND m.seq = t.reply_seq
        WHERE t.conversation_key = $1`,
      [conversationKey],
    );
    if (rows.length !== turns) throw new Error(`${conversationKey}: ${rows.length} turns, not ${turns}`);
    for (const row of rows) {
      const i = Number(row.message_id.slice(row.message_id.lastIndexOf('-') + 1));
      if (row.status !== 'replied' || row.text === null)
        throw new Error(`${conversationKey}: turn ${i} ended ${row.status} without a reply`);
      if (i % TOOL_EVERY === 0 && !row.text.includes(`tool result: order B${i}: shipped`))
        throw new Error(`${conversationKey}: turn ${i} did not reply with the tool's answer: ${row.text}`);
    }
  } finally {
    await db.end();
  }
}

/** A replay evaluation of the conversation, timed from its POST until its GET says it no longer runs. */
async function replay(
  stack: KeelStack,
  client: Client,
  conversationId: string,
  turns: number,
): Promise<{ ms: number; breakdown: ReplayBreakdown }> {
  const postedAt = Date.now();
  const t0 = performance.now();
  const res = await fetch(`${stack.api}/v1/agents/${AGENT}/evals`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ mode: 'replay', recorded: { conversationIds: [conversationId] } }),
  });
  if (res.status !== 202) throw new Error(`POST evals: ${res.status} ${await res.text()}`);
  const { id } = (await res.json()) as { id: string };
  let view: EvalView;
  for (;;) {
    const got = await fetch(`${stack.api}/v1/agents/${AGENT}/evals/${id}`);
    if (!got.ok) throw new Error(`GET eval ${id}: ${got.status} ${await got.text()}`);
    view = (await got.json()) as EvalView;
    if (view.status !== 'running') break;
    await sleep(POLL_MS);
  }
  const ms = performance.now() - t0;
  const seenAt = Date.now();
  const summary = view.summary;
  const c = view.cases[0];
  const problems = [
    view.status !== 'finished' && `status ${view.status} (${JSON.stringify(summary)})`,
    view.cases.length !== 1 && `${view.cases.length} cases, not 1`,
    c &&
      (c.status !== 'passed' || !c.result?.passed) &&
      `case ${c.caseId} ${c.status}: ${c.result?.reasons.join('; ')}`,
    c?.result && c.result.turns !== turns && `case ran ${c.result.turns} turns, not ${turns}`,
    (!summary || !('modelCalls' in summary)) && `summary ${JSON.stringify(summary)}`,
    summary && 'modelCalls' in summary && summary.modelCalls !== 0 && `${summary.modelCalls} model calls, not 0`,
  ].filter((p): p is string => typeof p === 'string');
  if (problems.length) throw new Error(`replay ${id} of ${conversationId}: ${problems.join(', ')}`);
  const evalEvents = await fetchEvents(client, evalWorkflowId(AGENT, id));
  const caseEvents = await fetchEvents(client, evalCaseWorkflowId(AGENT, id, 1));
  return {
    ms,
    breakdown: breakdownOf(evalEvents, caseEvents, {
      postedAt,
      seenAt,
      finishedAt: view.finishedAt,
      playMs: c?.result?.latencyMs ?? 0,
    }),
  };
}

const at = (e: HistoryEvent | undefined) =>
  e ? Number(e.eventTime?.seconds ?? 0) * 1000 + (e.eventTime?.nanos ?? 0) / 1e6 : NaN;

function breakdownOf(
  evalEvents: readonly HistoryEvent[],
  caseEvents: readonly HistoryEvent[],
  t: { postedAt: number; seenAt: number; finishedAt: string | null; playMs: number },
): ReplayBreakdown {
  const byId = new Map<number, HistoryEvent>();
  const activityRunMs: Record<string, number> = {};
  const turnRuns: number[] = [];
  let activities = 0;
  let activityQueueMs = 0;
  let workflowTaskQueueMs = 0;
  let workflowTaskRunMs = 0;
  let betweenActivitiesMs = 0;
  let lastActivityEnd: number | undefined;
  for (const e of caseEvents) {
    byId.set(Number(e.eventId), e);
    switch (e.eventType) {
      case EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
        workflowTaskQueueMs += at(e) - at(byId.get(Number(e.workflowTaskStartedEventAttributes?.scheduledEventId)));
        break;
      case EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
        workflowTaskRunMs += at(e) - at(byId.get(Number(e.workflowTaskCompletedEventAttributes?.startedEventId)));
        break;
      case EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        if (lastActivityEnd !== undefined) betweenActivitiesMs += at(e) - lastActivityEnd;
        break;
      case EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: {
        const a = e.activityTaskCompletedEventAttributes;
        const scheduled = byId.get(Number(a?.scheduledEventId));
        const began = byId.get(Number(a?.startedEventId));
        const type = scheduled?.activityTaskScheduledEventAttributes?.activityType?.name ?? '?';
        const run = at(e) - at(began);
        activities++;
        // An activity's Started event is written when it completes, with the time its attempt began.
        activityQueueMs += at(began) - at(scheduled);
        activityRunMs[type] = round((activityRunMs[type] ?? 0) + run, 2);
        if (type === 'runEvalTurn') turnRuns.push(run);
        lastActivityEnd = at(e);
        break;
      }
    }
  }
  const mean = (s: readonly number[]) => (s.length ? s.reduce((a, b) => a + b, 0) / s.length : 0);
  const evalStart = at(evalEvents[0]);
  const evalEnd = at(evalEvents.at(-1));
  const caseStart = at(caseEvents[0]);
  const caseEnd = at(caseEvents.at(-1));
  return {
    postToWorkflowStartMs: round(evalStart - t.postedAt),
    toCaseStartMs: round(caseStart - evalStart),
    caseSpanMs: round(caseEnd - caseStart),
    afterCaseMs: round(evalEnd - caseEnd),
    closeToSeenMs: round(t.seenAt - evalEnd),
    activities,
    activityQueueMs: round(activityQueueMs),
    activityRunMs,
    workflowTaskQueueMs: round(workflowTaskQueueMs),
    workflowTaskRunMs: round(workflowTaskRunMs),
    betweenActivitiesMs: round(betweenActivitiesMs),
    turnRunFirst10Ms: round(mean(turnRuns.slice(0, 10)), 2),
    turnRunLast10Ms: round(mean(turnRuns.slice(-10)), 2),
    playMs: t.playMs,
  };
}

/** The verdict, and what a replayed turn costs against a live one (medians over the rounds). */
function verdict(r: Results): string {
  const m = (f: (x: Round) => number) => round(median(r.rounds.map(f)), 1);
  const turnRun = m((x) => (x.replay.activityRunMs.runEvalTurn ?? 0) / r.turns);
  const between = m((x) => x.replay.betweenActivitiesMs / r.turns);
  const queue = m((x) => x.replay.activityQueueMs / r.turns);
  const play = m((x) => x.replay.playMs / r.turns);
  return (
    `**Verdict: ${r.met ? 'met' : 'missed'}** (${r.medianRatio}× against ≤ ${r.goalRatio}×). A live turn took ` +
    `${m((x) => x.livePerTurnMs)} ms, a replayed one ${m((x) => x.replayPerTurnMs)} ms (medians over the rounds). ` +
    `Per replayed turn: runEvalTurn ran ${turnRun} ms (${play} ms of it the replay of the answers itself; the rest ` +
    'around it: the case with the configurations fixed at its start and its earlier turns read, the turn written), ' +
    `waited ${queue} ms for a worker, and ${between} ms passed between one ` +
    "turn's activity and the next (the case workflow's task that schedules it): the replay makes no model call, but " +
    'each of its turns is an ordinary activity with a workflow task between two of them.'
  );
}

const BEGIN = '<!-- bench:evals -->';
const END = '<!-- /bench:evals -->';

/** The evaluation section of REPORT.md, replaced in place between its markers (appended the first time). */
async function writeSection(r: Results): Promise<void> {
  const rows = r.rounds.map(
    (x, i) =>
      `| ${i + 1} | ${x.liveMs} ms | ${x.livePerTurnMs} ms | ${x.replayMs} ms | ${x.replayPerTurnMs} ms | ` +
      `${x.ratio}× |`,
  );
  const where = r.rounds.map((x, i) => {
    const b = x.replay;
    const runs = Object.entries(b.activityRunMs)
      .map(([k, v]) => `${k} ${round(v)} ms`)
      .join(', ');
    return (
      `| ${i + 1} | ${b.postToWorkflowStartMs} | ${b.toCaseStartMs} | ${b.caseSpanMs} | ${b.afterCaseMs} | ` +
      `${b.closeToSeenMs} | ${b.activities}: ${runs} | ${b.activityQueueMs} | ${b.betweenActivitiesMs} | ` +
      `${b.turnRunFirst10Ms} → ${b.turnRunLast10Ms} | ${b.playMs} |`
    );
  });
  const section = [
    BEGIN,
    '## Replaying recorded turns against live ones (issue 30)',
    '',
    `Run ${r.date} by \`npm run bench:evals\` on ${r.machine.cores} cores (${r.machine.cpu}), Node ` +
      `${r.machine.node}, ${r.machine.os}: one Temporal dev server (SQLite), one embedded PostgreSQL, Keel's ` +
      'worker and API each in a process of their own, the scripted model at zero delay and the shop MCP server over ' +
      'streamable HTTP on loopback.',
    '',
    `Each round: **live**, a fresh conversation of ${r.turns} turns, each POSTed once the one before it ended, every ` +
      `${r.toolEvery}th a read-only MCP call (\`/tool shop__lookup_order\`), the others plain text, timed from the ` +
      "first POST to the last turn's `turn.finished` event (every turn checked to have replied, each tool turn with " +
      "the tool's answer); then **replay**, `POST /v1/agents/{agentId}/evals` in mode `replay` of that " +
      'conversation, timed from the POST until its GET (asked every 50 ms) says it no longer runs; it must finish, ' +
      'its one case pass and its summary count no model call. A warm-up conversation of ' +
      `${WARM_TURNS} turns and its replay ran first, not counted.`,
    '',
    '| round | live | live per turn | replay | replay per turn | replay / live |',
    '| --- | --- | --- | --- | --- | --- |',
    ...rows,
    '',
    '| goal | measured | met |',
    '| --- | --- | --- |',
    `| replaying ${r.turns} recorded turns ≤ ${r.goalRatio}× the time of ${r.turns} live scripted-model turns | ` +
      `${r.medianRatio}× (median of ${r.rounds.length} rounds) | ${r.met ? 'yes' : '**no**'} |`,
    '',
    "Where the replay's time goes, from its two workflows' histories (ms; the case workflow runs one activity per " +
      'turn, then scoreEvalCase): POST → the evaluation workflow started (the API takes the case from PostgreSQL and ' +
      'keeps it); → its case workflow started; the case workflow start → close; its close → the evaluation closed ' +
      "(finishEvaluation); the close → the bench's GET seeing it; the case's activities and their summed run times; " +
      'their summed queue time (scheduled → started); the summed time between one activity ending and the next ' +
      "scheduled (a workflow task each); runEvalTurn's mean run time over the first 10 turns → the last 10; the sum " +
      "of the turns' own latencyMs (the replay of their answers, inside runEvalTurn).",
    '',
    verdict(r),
    '',
    '| round | POST → start | → case | case span | → closed | → seen | activities | queue | between | ' +
      'turn run, first 10 → last 10 | play |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
    ...where,
    END,
  ].join('\n');
  await replaceReportSection({ begin: BEGIN, end: END }, section);
}

/** `--report`: the section written again from the last results (bench/evals-results.json), without a run. */
const run = process.argv.includes('--report')
  ? async () => {
      const results = JSON.parse(await readFile(RESULTS, 'utf8')) as Results;
      await writeSection(results);
      console.log(summaryLine(results));
    }
  : main;
run().catch((err: unknown) => {
  console.error('bench:evals failed:', err);
  process.exit(1);
});
