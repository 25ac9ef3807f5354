import { Context } from '@temporalio/activity';
import { getAgent } from '../db/agents';
import { getApp } from '../db/apps';
import { appendTranscript, ensureConversation } from '../db/conversations';
import { inTransaction } from '../db/pool';
import * as artifactsDb from '../db/artifacts';
import * as routineJournalDb from '../db/routine-journal';
import * as routineRunsDb from '../db/routine-runs';
import * as routineToolsDb from '../db/routine-tools';
import * as routinesDb from '../db/routines';
import { conversationWorkflowId, routineCallKey, routineConversationId, transcriptOrigin } from '../domain/ids';
import {
  artifactTitle,
  isCrash,
  parseAuthoredTool,
  placeholderArguments,
  routinePrompt,
  selectTool,
  toolArguments,
  unknownCapabilities,
  type AuthoredTool,
  type FinishedRunStatus,
  type Gate,
  type RoutineSettings,
} from '../domain/routines';
import { textOf } from '../domain/transcript';
import { AUTHORING_SYSTEM, authoringMessage, repairMessage } from '../domain/tool-authoring';
import type { Transports } from '../adapters/delivery/transport';
import { askQuestion, modelCallFailure, type ModelCallDeps } from './model-call';
import { noticingBudgetStop } from './owner-notice';
import { currentStep, heartbeatWhile } from './step';
import { runCapabilities, simulatedCapabilities } from './routine-capabilities';
import { abandonIfClosed } from './routines';
import type { EgressGuard } from '../adapters/egress';
import { runInSandbox } from '../adapters/sandbox';
import { findSecret, secretNotice } from '../domain/secret-scan';

export interface RoutineRunDeps extends ModelCallDeps {
  defaultModel: string;
  transports: Transports;
  routines: RoutineSettings;
  egress: EgressGuard;
}

interface RunIds {
  runId: string;
  agentId: string;
  appId: string;
  slug: string;
}

export interface ToolRef {
  name: string;
  version: number;
}

export type BegunRoutineRun =
  | { kind: 'skipped'; reason: string }
  | { kind: 'no_prompt'; reason: string; sessionId: string }
  | { kind: 'run'; prompt: string; sessionId: string; approvalWaitMs: number };

export type DraftResult = { ok: true; tool: AuthoredTool } | { ok: false; failure: string; repairable: boolean };

export type ToolRunResult =
  | { status: 'ok'; digest: string }
  | { status: 'error'; detail: string }
  | { status: 'needs_approval'; gate: Gate; seq: number };

const transcriptKey = (r: { agentId: string; appId: string; slug: string }) =>
  conversationWorkflowId(r.agentId, routineConversationId(r.appId, r.slug));

/** A tool's result as the run's digest: a string as it is, anything else as JSON. */
const digestOf = (result: unknown) => (typeof result === 'string' ? result : JSON.stringify(result));

/**
 * A run's result becomes its digest, transcript entry and artifact, which people read and the console shows: text that
 * looks like it carries a secret is withheld, and the run says why, never the text. It is checked when the tool
 * returns (so that it stays out of the workflow's history) and again before the record is written (a digest from
 * elsewhere, such as an authoring failure, passes there too).
 */
function withheld(text: string): string | undefined {
  const secret = findSecret(text);
  return secret && `withheld: ${secretNotice(secret)}`;
}

/**
 * A fire opens a run, unless the routine is gone or paused (a fire that raced a pause) or another run is in
 * flight. The prompt is chosen here: the routine's playbook rule, its prompt, its label.
 */
export async function beginRoutineRun(
  deps: RoutineRunDeps,
  input: RunIds & { workflowId: string; firedAt: string },
): Promise<BegunRoutineRun> {
  const { pool } = deps;
  const routine = await routinesDb.getRoutine(pool, input.agentId, input.appId, input.slug);
  if (!routine) return { kind: 'skipped', reason: 'the routine was deleted' };
  if (routine.status === 'paused') return { kind: 'skipped', reason: 'the routine is paused' };
  const chosen = routinePrompt(routine);
  const sessionId = routineConversationId(input.appId, input.slug);
  const row = {
    ...input,
    firedAt: new Date(input.firedAt),
    prompt: 'prompt' in chosen ? chosen.prompt : null,
    sessionId,
    approvalWaitMs: deps.routines.approvalWaitMs,
  };
  let begun = await routineRunsDb.beginRun(pool, row);
  if (begun.kind === 'busy' && (await abandonIfClosed(pool, Context.current().client, begun.running)))
    begun = await routineRunsDb.beginRun(pool, row);
  if (begun.kind === 'busy') return { kind: 'skipped', reason: `run ${begun.running.runId} is still in flight` };
  if ('error' in chosen) return { kind: 'no_prompt', reason: chosen.error, sessionId };
  // The wait the run recorded (a retried begin finds the first attempt's), so that what the workflow waits and
  // what the run says it waits are one number.
  const approvalWaitMs = begun.run.approvalWaitMs ?? deps.routines.approvalWaitMs;
  return { kind: 'run', prompt: chosen.prompt, sessionId, approvalWaitMs };
}

/** A saved tool the prompt asks for (domain rule), recorded on the run; null → the run authors one. */
export async function findRoutineTool(
  deps: RoutineRunDeps,
  input: RunIds & { prompt: string },
): Promise<ToolRef | null> {
  const { pool } = deps;
  const tool = selectTool(input.prompt, await routineToolsDb.listTools(pool, input.agentId, input.appId));
  if (!tool) return null;
  await routineRunsDb.setRunTool(pool, input.runId, { name: tool.name, version: tool.version, authored: false });
  return { name: tool.name, version: tool.version };
}

/**
 * One authoring attempt: the model writes a tool, which must parse, call only known capabilities and survive a
 * smoke run with simulated capabilities and placeholder arguments. `repair` carries the first attempt's crash.
 */
export async function draftRoutineTool(
  deps: RoutineRunDeps,
  input: RunIds & { prompt: string; repair?: string },
): Promise<DraftResult> {
  const { pool } = deps;
  const ctx = Context.current();
  const app = await getApp(pool, input.agentId, input.appId);
  const tables = app?.tables ?? [];
  const agent = await getAgent(pool, input.agentId);
  const text = input.repair
    ? repairMessage(input.prompt, tables, input.repair)
    : authoringMessage(input.prompt, tables);
  // A request the model refuses ends authoring; anything else is retried by Temporal.
  const step = currentStep();
  const call = input.repair ? 2 : 1;
  const res = await noticingBudgetStop(
    { pool, transports: deps.transports, agentId: input.agentId, step },
    askQuestion(
      deps,
      { model: agent?.model ?? deps.defaultModel, system: AUTHORING_SYSTEM, text, maxTokens: 4096 },
      {
        callKey: routineCallKey.authoring(input.runId, call),
        payer: { agentId: input.agentId, kind: 'authoring', routineRunId: input.runId },
        asker: { ...step, conversationKey: transcriptKey(input), turnId: input.runId, callIndex: call },
      },
    ),
  ).catch((err: unknown) => {
    throw modelCallFailure(err);
  });
  const reply = textOf(res.content);
  const parsed = parseAuthoredTool(reply);
  if (!parsed.ok) return { ok: false, failure: `the answer is not a tool: ${parsed.error}`, repairable: true };
  const unknown = unknownCapabilities(parsed.tool.code);
  if (unknown.length)
    return {
      ok: false,
      failure: `references a capability that does not exist here: ${unknown.join(', ')}`,
      repairable: true,
    };
  ctx.heartbeat();
  const smoke = await runInSandbox(
    parsed.tool,
    placeholderArguments(parsed.tool.inputs),
    simulatedCapabilities(tables),
    {
      memoryMb: deps.routines.memoryLimitMb,
      timeoutMs: deps.routines.smokeLimitMs,
    },
  );
  // A gate or a time limit passes the smoke run; a crash of the code itself does not.
  if (smoke.status === 'error' && isCrash(smoke.detail)) return { ok: false, failure: smoke.detail, repairable: true };
  return { ok: true, tool: parsed.tool };
}

/** Saves the authored tool as the next version of its name; once per run. */
export async function saveRoutineTool(deps: RoutineRunDeps, input: RunIds & { tool: AuthoredTool }): Promise<ToolRef> {
  const { pool } = deps;
  const saved = await inTransaction(pool, async (db) => {
    const t = await routineToolsDb.saveTool(db, input.agentId, input.appId, input.tool, 'model', input.runId);
    await routineRunsDb.setRunTool(db, input.runId, { name: t.name, version: t.version, authored: true });
    return t;
  });
  return { name: saved.name, version: saved.version };
}

/**
 * Runs the tool in the sandbox with the real capabilities. The journal of earlier executions of this run is
 * replayed, so a re-run after approval (or after a crash of the worker) executes nothing twice.
 */
export async function runRoutineTool(
  deps: RoutineRunDeps,
  input: RunIds & { tool: ToolRef; prompt: string; approvedSeqs: number[] },
): Promise<ToolRunResult> {
  const { pool } = deps;
  const ctx = Context.current();
  const tool = await routineToolsDb.getTool(pool, input.agentId, input.appId, input.tool.name, input.tool.version);
  if (!tool) return { status: 'error', detail: `tool ${input.tool.name} v${input.tool.version} no longer exists` };
  const [app, routine, journal] = await Promise.all([
    getApp(pool, input.agentId, input.appId),
    routinesDb.getRoutine(pool, input.agentId, input.appId, input.slug),
    routineJournalDb.loadJournal(pool, input.runId),
  ]);
  // Aborted when the run ends (a time limit, a gate): a host call still in flight must not land afterwards.
  const stopped = new AbortController();
  const host = runCapabilities(
    { ...deps, integrations: deps.routines.integrations },
    {
      runId: input.runId,
      agentId: input.agentId,
      appId: input.appId,
      tables: app?.tables ?? [],
      delivery: routine?.delivery ?? null,
      conversationKey: transcriptKey(input),
      journal,
      approvedSeqs: input.approvedSeqs,
      attempt: ctx.info.attempt,
      heartbeat: () => ctx.heartbeat(),
      signal: AbortSignal.any([ctx.cancellationSignal, stopped.signal]),
    },
  );
  // Heartbeats while the tool runs, so that a dead worker is noticed within the heartbeat timeout, not the run
  // limit.
  const ran = await heartbeatWhile(
    runInSandbox(tool, toolArguments(tool.inputs, input.prompt), host, {
      memoryMb: deps.routines.memoryLimitMb,
      timeoutMs: deps.routines.runLimitMs,
    }),
    () => ctx.heartbeat(),
    5_000,
  );
  if (ran.status === 'ok') {
    const digest = digestOf(ran.result);
    const refused = withheld(digest);
    return refused ? { status: 'error', detail: refused } : { status: 'ok', digest };
  }
  if (ran.status === 'error') return { status: 'error', detail: withheld(ran.detail) ?? ran.detail };
  return ran;
}

/**
 * The run waits for a human: visible as needs_approval with the gate's capability and detail, since when and until
 * when (the wait it recorded as it began).
 */
export async function holdRoutineRun(deps: RoutineRunDeps, input: { runId: string; gate: Gate }): Promise<void> {
  const { pool } = deps;
  await routineRunsDb.markNeedsApproval(
    pool,
    input.runId,
    input.gate,
    `paused for your approval: ${input.gate.detail}`,
    deps.routines.approvalWaitMs,
  );
}

export async function recordRoutineDecision(
  deps: RoutineRunDeps,
  input: { runId: string; approved: boolean; note?: string },
): Promise<void> {
  const { pool } = deps;
  await routineRunsDb.recordDecision(pool, input.runId, {
    approved: input.approved,
    ...(input.note ? { note: input.note } : {}),
  });
}

/**
 * The run's record, in one transaction: the prompt and digest appended to the routine's transcript, one numbered
 * Markdown artifact, and the run's final status. The routine's own definition is not touched.
 */
export async function finishRoutineRun(
  deps: RoutineRunDeps,
  input: RunIds & { status: FinishedRunStatus; digest: string; prompt: string | null },
): Promise<{ artifactId: string }> {
  const { pool } = deps;
  const digest = withheld(input.digest) ?? input.digest;
  return inTransaction(pool, async (db) => {
    const run = await routineRunsDb.getRun(db, input.runId);
    const key = transcriptKey(input);
    const conversationId = routineConversationId(input.appId, input.slug);
    await ensureConversation(db, { key, agentId: input.agentId, conversationId });
    await appendTranscript(db, key, input.runId, [
      ...(input.prompt
        ? [
            {
              role: 'user' as const,
              content: [{ type: 'text' as const, text: `(scheduled) ${input.prompt}` }],
              text: `(scheduled) ${input.prompt}`,
              origin: transcriptOrigin.routineRun(input.runId, 'prompt'),
            },
          ]
        : []),
      {
        role: 'assistant',
        content: [{ type: 'text', text: digest }],
        text: digest,
        origin: transcriptOrigin.routineRun(input.runId, 'digest'),
      },
    ]);
    const producedBy = run?.toolName ?? input.slug;
    const artifact = await artifactsDb.writeArtifact(db, {
      agentId: input.agentId,
      appId: input.appId,
      runId: input.runId,
      producedBy,
      title: (n) => artifactTitle(producedBy, n),
      content: artifactMarkdown({
        ...input,
        digest,
        tool: run?.toolName ? `${run.toolName} v${run.toolVersion}` : null,
        firedAt: run?.firedAt ?? null,
      }),
    });
    await routineRunsDb.finishRun(db, input.runId, {
      status: input.status,
      digest,
      artifactId: artifact.artifactId,
    });
    return { artifactId: artifact.artifactId };
  });
}

function artifactMarkdown(r: {
  slug: string;
  runId: string;
  status: string;
  digest: string;
  prompt: string | null;
  tool: string | null;
  firedAt: string | null;
}): string {
  return [
    `# Routine ${r.slug}: ${r.status}`,
    '',
    `- Run: \`${r.runId}\``,
    ...(r.firedAt ? [`- Fired: ${r.firedAt}`] : []),
    `- Tool: ${r.tool ?? '(none)'}`,
    '',
    '## Prompt',
    '',
    r.prompt ?? '(none)',
    '',
    '## Digest',
    '',
    r.digest,
    '',
  ].join('\n');
}
