import { randomUUID } from 'node:crypto';
import { destinationBook, getAgent } from '../db/agents';
import { getRecord, listRecords, upsertRecord, type AppRecord } from '../db/apps';
import { beginEffect, settleEffect } from '../db/effects';
import { inTransaction, type Pool } from '../db/pool';
import { journalCall, type JournalEntry } from '../db/routine-journal';
import { RecordId, unknownFields, type AppDefinition } from '../domain/apps';
import { canonicalJson, inCanonicalOrder, sameJson } from '../domain/canonical-json';
import {
  destinationNames,
  NO_DELIVERY,
  resolveDestination,
  unknownDestination,
  type Delivery,
} from '../domain/delivery';
import { ModelRequestError } from '../domain/model';
import { GATED_CAPABILITIES, placeholderFor, type Capability, type Gate } from '../domain/routines';
import { containsNul, scrub } from '../domain/text';
import { findSecret, secretNotice } from '../domain/secret-scan';
import { routineCallKey } from '../domain/ids';
import { textOf } from '../domain/transcript';
import { AI_SYSTEM, aiMessage, parseScore, type AiCapability } from '../domain/tool-authoring';
import type { Transports } from '../adapters/delivery/transport';
import { deliverOnce } from './delivery';
import { askQuestion, BudgetStop, type ModelCallDeps } from './model-call';
import { noticingBudgetStop } from './owner-notice';
import { egressFailureOf, type EgressGuard } from '../adapters/egress';
import { CapabilityError, RunStop, type CapabilityHost } from '../adapters/sandbox';

export const BROWSER_UNAVAILABLE = 'browser is not available on this deployment: no browser is connected to Keel';
const notConnected = (name: string) => `integration "${name}" is not connected: configure it in KEEL_INTEGRATIONS`;

type Tables = AppDefinition['tables'];

const str = (v: unknown): string =>
  typeof v === 'string' ? v : v === undefined || v === null ? '' : JSON.stringify(v);
const shorten = (text: string, max = 200) => (text.length > max ? `${text.slice(0, max)}…` : text);

function tableOf(tables: Tables, name: unknown): Tables[number] {
  const t = tables.find((x) => x.name === name);
  if (!t)
    throw new CapabilityError(
      `no table "${str(name)}" in this app (its tables: ${tables.map((x) => x.name).join(', ') || 'none'})`,
    );
  return t;
}

/** What a gated call would do, for the human who approves it. */
export function gateOf(capability: Capability, args: readonly unknown[], target: Delivery): Gate {
  const shown = shorten(str(args[0]));
  if (capability === 'browser') return { capability, detail: `control your browser to ${shown}` };
  const named = typeof args[1] === 'string' ? `destination "${args[1]}", ` : '';
  const to =
    named +
    (target.channel === 'webhook'
      ? `webhook ${new URL(target.url).host}`
      : target.channel === 'slack'
        ? `Slack ${target.target}`
        : 'nowhere (no delivery is set)');
  return { capability, detail: `send "${shown}" to ${to}` };
}

/**
 * The simulated capabilities of a smoke run: placeholder records of the app's real tables, fixed model answers, no
 * effects. A gate ends the smoke run as a pass (its effect is not tried).
 */
export function simulatedCapabilities(tables: Tables): CapabilityHost {
  const placeholder = (t: Tables[number]): AppRecord => ({
    id: 'rec-1',
    ...Object.fromEntries(t.columns.map((c) => [c, placeholderFor(c)])),
  });
  return async (capability, args) => {
    switch (capability) {
      case 'data.list':
        return [placeholder(tableOf(tables, args[0]))];
      case 'data.get':
        return { ...placeholder(tableOf(tables, args[0])), id: str(args[1]) || 'rec-1' };
      case 'data.upsert':
        tableOf(tables, args[0]);
        return { id: 'rec-1', ...(typeof args[1] === 'object' && args[1] ? args[1] : {}) };
      case 'ai.score':
        return 50;
      case 'ai.summarize':
        return '(simulated summary)';
      case 'ai.write':
        return '(simulated draft)';
      case 'integrations.call':
        throw new CapabilityError(notConnected(str(args[0])));
      case 'browser':
        throw new CapabilityError(BROWSER_UNAVAILABLE);
      case 'send':
        // The names are the agent's, unknown here; a target that is no name at all fails the smoke run already.
        if (args[1] !== undefined && typeof args[1] !== 'string') throw new CapabilityError(SEND_TARGET_REFUSED);
        throw new RunStop({ kind: 'gate', gate: gateOf('send', args, NO_DELIVERY), seq: 0 });
      default:
        throw new CapabilityError(`${capability} is not a capability`);
    }
  };
}

export interface RealCapabilityDeps extends ModelCallDeps {
  defaultModel: string;
  transports: Transports;
  /** Configured HTTP integrations: name → URL that takes a JSON POST. */
  integrations: Record<string, string>;
  /** The egress guard integration calls go through. */
  egress: EgressGuard;
}

export interface RunScope {
  runId: string;
  agentId: string;
  appId: string;
  tables: Tables;
  /** Where `send` delivers: the routine's delivery, else the agent's owner delivery. */
  delivery: Delivery | null;
  /** The routine's transcript key, for providers that script per conversation. */
  conversationKey: string;
  /** The journal of this run's earlier executions. */
  journal: readonly JournalEntry[];
  /** Gated calls (by journal seq) a human has approved. */
  approvedSeqs: readonly number[];
  attempt: number;
  heartbeat(): void;
  signal: AbortSignal;
}

const isGated = (c: string): c is Capability => (GATED_CAPABILITIES as readonly string[]).includes(c);

/**
 * Whether a call is the one the journal holds under its seq. The journal's args came back from jsonb, which reorders
 * object keys, so they are compared in canonical form, never as JSON.stringify of each.
 */
const sameCall = (e: JournalEntry, capability: string, args: readonly unknown[]) =>
  e.capability === capability && sameJson(e.args, args);

/** A call as a reader recognises it: `data.upsert("orders",{"customer":"Zed"})`, keys in canonical order. */
const callText = (capability: string, args: readonly unknown[]) =>
  `${capability}(${shorten(canonicalJson(args).slice(1, -1))})`;

/**
 * The real capabilities of a run. Every call is journaled in call order; a call the journal already holds returns
 * its recorded result and is not executed again, so a re-run (after approval, or after a crash) repeats nothing.
 * Mutating calls go through the effects ledger or commit with their journal entry. Gated calls stop the run until a
 * human approves that call.
 */
export function runCapabilities(deps: RealCapabilityDeps, scope: RunScope): CapabilityHost {
  let seq = 0;
  const call: CapabilityHost = async (capability, args) => {
    const at = ++seq;
    scope.heartbeat();
    const recorded = scope.journal.find((e) => e.seq === at);
    if (recorded && !sameCall(recorded, capability, args)) {
      const [before, now] = [callText(recorded.capability, recorded.args), callText(capability, args)];
      const detail = `the tool did not repeat its earlier calls: call ${at} was ${before} before and ${now} now`;
      throw new RunStop({ kind: 'error', detail });
    }
    if (recorded && recorded.outcome === 'error') throw new CapabilityError(recorded.error ?? 'failed');
    if (recorded && recorded.outcome === 'ok') return recorded.result;
    // Text that looks like it carries a secret never leaves, and no human is asked to approve sending it. The refusal
    // is not journaled, since the journal would keep the text; a re-run meets the same refusal.
    const secret = capability === 'send' ? findSecret(str(args[0])) : undefined;
    if (secret) throw new CapabilityError(`send refused: ${secretNotice(secret)}; nothing was sent`);
    // No browser is connected to Keel: asking a human to approve what cannot happen would waste the approval, so
    // browser fails at once (in execute) instead of stopping at its gate.
    let target: Delivery | undefined;
    if (isGated(capability) && capability !== 'browser') {
      // What the human approves is this call to this target: the call is journaled as gated with the target it is
      // shown with, and its approved execution sends exactly that, even if the routine's delivery changed meanwhile.
      // A refused target is journaled as the call's error, so that a re-run meets the same refusal.
      target = recorded
        ? (recorded.result as { target: Delivery }).target
        : await sendTarget(deps.pool, scope, args).catch(async (err: unknown) => {
            if (err instanceof CapabilityError) {
              const refused = { outcome: 'error' as const, result: null, error: err.message };
              await journalCall(deps.pool, scope.runId, { seq: at, capability, args, ...refused });
            }
            throw err;
          });
      if (!scope.approvedSeqs.includes(at)) {
        if (!recorded)
          await journalCall(deps.pool, scope.runId, {
            seq: at,
            capability,
            args,
            outcome: 'gated',
            result: { target },
            error: null,
          });
        throw new RunStop({ kind: 'gate', gate: gateOf(capability, args, target), seq: at });
      }
    }
    const journal = (entry: Omit<JournalEntry, 'seq' | 'capability' | 'args'>) =>
      journalCall(deps.pool, scope.runId, { seq: at, capability, args, ...entry });
    try {
      if (capability === 'data.upsert') {
        // The record, its effects-ledger entry and its journal entry commit together: once per call, whatever retries.
        return await inTransaction(deps.pool, async (db) => {
          const key = routineCallKey.effect(scope.runId, at, 'upsert');
          const effect = await beginEffect<AppRecord>(db, key, 'data.upsert', {
            appId: scope.appId,
            table: args[0],
            record: args[1],
          });
          if (effect.status === 'done' && effect.result) return effect.result;
          const record = await upsertChecked(db, scope, args);
          await settleEffect(db, key, 'done', record);
          await journalCall(db, scope.runId, { seq: at, capability, args, outcome: 'ok', result: record, error: null });
          return record;
        });
      }
      const result = await execute(deps, scope, capability, args, at, target);
      await journal({ outcome: 'ok', result, error: null });
      return result;
    } catch (err) {
      if (!(err instanceof CapabilityError)) throw err;
      await journal({ outcome: 'error', result: null, error: err.message });
      throw err;
    }
  };
  // A result reads the same fresh and replayed from the journal's jsonb, so that a later call the tool builds from it
  // (a send of JSON.stringify(answer)) is the very call that was journaled, and approved, before.
  return async (capability, args) => inCanonicalOrder(await call(capability, args));
}

const SEND_TARGET_REFUSED =
  'send(text, destination): destination is the name of a destination a person configured for this agent, never a ' +
  "URL or a Slack target; leave it out to send to the routine's delivery";

/**
 * Where `send(text, destination?)` goes: the routine's delivery, else the agent's owner delivery; or a destination a
 * person configured, by name. The tool's code may come from the model, so it never chooses a target of its own.
 */
async function sendTarget(pool: Pool, scope: RunScope, args: readonly unknown[]): Promise<Delivery> {
  const name = args[1];
  if (name === undefined) return scope.delivery ?? (await getAgent(pool, scope.agentId))?.ownerDelivery ?? NO_DELIVERY;
  const book = await destinationBook(pool, scope.agentId);
  if (typeof name !== 'string')
    throw new CapabilityError(
      `${SEND_TARGET_REFUSED} (its destinations: ${destinationNames(book).join(', ') || 'none'})`,
    );
  const target = resolveDestination(book, name);
  if (!target) throw new CapabilityError(`send: ${unknownDestination(book, name)}`);
  return target;
}

async function upsertChecked(
  db: Parameters<typeof upsertRecord>[0],
  scope: RunScope,
  args: readonly unknown[],
): Promise<AppRecord> {
  const t = tableOf(scope.tables, args[0]);
  const record = args[1];
  if (!record || typeof record !== 'object' || Array.isArray(record))
    throw new CapabilityError('data.upsert(table, record) takes a record object');
  const fields = record as Record<string, unknown>;
  const unknown = unknownFields(fields, t.columns);
  if (unknown.length) throw new CapabilityError(`table ${t.name} has no column(s): ${unknown.join(', ')}`);
  if (containsNul(fields)) throw new CapabilityError('record values must not contain the NUL character');
  // A new id, as the API gives one: the journal, not the id, keeps a retried call from creating a second record.
  const id = fields.id === undefined ? randomUUID() : fields.id;
  const parsedId = RecordId.safeParse(id);
  if (!parsedId.success) throw new CapabilityError(`record id: ${parsedId.error.issues[0]?.message ?? 'invalid'}`);
  return (await upsertRecord(db, scope.agentId, scope.appId, t.name, parsedId.data, fields)).record;
}

async function execute(
  deps: RealCapabilityDeps,
  scope: RunScope,
  capability: string,
  args: readonly unknown[],
  at: number,
  approvedTarget?: Delivery,
): Promise<unknown> {
  switch (capability) {
    case 'data.list':
      return listRecords(deps.pool, scope.agentId, scope.appId, tableOf(scope.tables, args[0]).name);
    case 'data.get':
      return (
        (await getRecord(deps.pool, scope.agentId, scope.appId, tableOf(scope.tables, args[0]).name, str(args[1]))) ??
        null
      );
    case 'ai.score':
    case 'ai.summarize':
    case 'ai.write': {
      const kind = capability.slice(3) as AiCapability;
      const text = await answerAi(deps, scope, kind, args, at);
      if (kind !== 'score') return text;
      const score = parseScore(text);
      if (score === undefined) throw new CapabilityError(`the model gave no score: ${text.slice(0, 100)}`);
      return score;
    }
    case 'integrations.call':
      return callIntegration(deps, scope, str(args[0]), args[1], at);
    case 'send': {
      const key = routineCallKey.effect(scope.runId, at, 'send');
      const target = approvedTarget ?? (await sendTarget(deps.pool, scope, args));
      const report = await deliverOnce(deps.pool, deps.transports, {
        effectKey: key,
        conversationKey: null,
        turnId: null,
        target,
        message: {
          agentId: scope.agentId,
          conversationId: null,
          turnId: null,
          text: str(args[0]),
          idempotencyKey: key,
        },
        signal: scope.signal,
      });
      if (report.outcome !== 'delivered' && !report.outcome.startsWith('skipped'))
        throw new CapabilityError(`send failed: ${report.outcome}`);
      return { outcome: report.outcome };
    }
    case 'browser':
      throw new CapabilityError(BROWSER_UNAVAILABLE);
    default:
      throw new CapabilityError(`${capability} is not a capability`);
  }
}

/**
 * An `ai.*` call: the scope's attempt, heartbeat and cancellation (the sandbox's host calls run outside the
 * activity's async context). A request the model refuses is the tool's error to handle; anything else is retried
 * with the activity.
 */
async function answerAi(
  deps: RealCapabilityDeps,
  scope: RunScope,
  kind: AiCapability,
  args: readonly unknown[],
  at: number,
): Promise<string> {
  const agent = await getAgent(deps.pool, scope.agentId);
  const model = agent?.model ?? deps.defaultModel;
  const question = { model, system: AI_SYSTEM[kind], text: aiMessage(kind, args), maxTokens: 1024 };
  const asker = {
    attempt: scope.attempt,
    conversationKey: scope.conversationKey,
    turnId: scope.runId,
    callIndex: at,
    heartbeat: () => scope.heartbeat(),
    signal: scope.signal,
    sleep: (ms: number) => new Promise<void>((r) => setTimeout(r, ms)),
  };
  const payer = {
    agentId: scope.agentId,
    kind: 'routine' as const,
    conversationKey: scope.conversationKey,
    routineRunId: scope.runId,
  };
  // Budgets first: a call they do not allow is the tool's error to catch, as a refusal is.
  try {
    const res = await noticingBudgetStop(
      { pool: deps.pool, transports: deps.transports, agentId: scope.agentId, step: scope },
      askQuestion(deps, question, { callKey: routineCallKey.ai(scope.runId, at), payer, asker }),
    );
    return scrub(textOf(res.content));
  } catch (err) {
    if (err instanceof BudgetStop) throw new CapabilityError(`ai.${kind}: ${err.message}`);
    if (err instanceof ModelRequestError) {
      throw new CapabilityError(`ai.${kind}: the model refused the request: ${err.message}`);
    }
    throw err;
  }
}

/** A configured integration: one JSON POST through the effects ledger (a retry returns the recorded answer). */
async function callIntegration(
  deps: RealCapabilityDeps,
  scope: RunScope,
  name: string,
  payload: unknown,
  at: number,
): Promise<unknown> {
  const url = deps.integrations[name];
  if (!url) throw new CapabilityError(notConnected(name));
  const key = routineCallKey.effect(scope.runId, at, 'integration');
  const effect = await beginEffect<{ ok: boolean; value?: unknown; error?: string }>(deps.pool, key, 'integration', {
    name,
    payload,
  });
  let answer = effect.status === 'pending' ? undefined : effect.result;
  if (!answer) {
    answer = await postToIntegration(deps.egress, name, url, key, payload, scope.signal);
    await settleEffect(deps.pool, key, answer.ok ? 'done' : 'failed', answer);
  }
  if (!answer.ok) throw new CapabilityError(answer.error ?? `integration "${name}" failed`);
  return answer.value;
}

/** One POST through the egress guard; a refused address or a redirect is the call's recorded failure, not retried. */
async function postToIntegration(
  egress: EgressGuard,
  name: string,
  url: string,
  key: string,
  payload: unknown,
  signal: AbortSignal,
): Promise<{ ok: boolean; value?: unknown; error?: string }> {
  let res: Response;
  try {
    res = await egress.fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify(payload ?? null),
      signal: AbortSignal.any([signal, AbortSignal.timeout(60_000)]),
    });
  } catch (err) {
    const refused = egressFailureOf(err);
    if (!refused) throw err;
    return { ok: false, error: `integration "${name}": ${refused.message}` };
  }
  // Scrubbed: an answer PostgreSQL cannot store (NUL, a lone surrogate) would fail the effect's write and call the
  // integration again on every retry.
  const body = scrub(await res.text());
  return res.ok
    ? { ok: true, value: scrub(parseJsonOrText(body)) }
    : { ok: false, error: `integration "${name}" answered ${res.status}: ${body.slice(0, 200)}` };
}

function parseJsonOrText(body: string): unknown {
  if (!body) return null;
  try {
    return JSON.parse(body) as unknown;
  } catch {
    return body;
  }
}
