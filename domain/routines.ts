import { z } from 'zod';
import { canonicalTimeZone, cronRefusal, parseCron } from './cron';
import { Delivery } from './delivery';
import { storableString } from './text';
import { BudgetUsd } from './spend';
import { ROUTINES } from './routine-limits';
export { ROUTINES } from './routine-limits';

/** A deployment's routine settings (tests shorten the limits). */
export interface RoutineSettings {
  floorMs: number;
  smokeLimitMs: number;
  runLimitMs: number;
  memoryLimitMb: number;
  approvalWaitMs: number;
  /** Configured HTTP integrations for `integrations.call`: name → URL taking a JSON POST. */
  integrations: Record<string, string>;
}

export const DEFAULT_ROUTINE_SETTINGS: RoutineSettings = {
  floorMs: ROUTINES.defaultFloorMs,
  smokeLimitMs: ROUTINES.smokeRunLimitMs,
  runLimitMs: ROUTINES.runLimitMs,
  memoryLimitMb: ROUTINES.memoryLimitMb,
  approvalWaitMs: ROUTINES.approvalWaitMs,
  integrations: {},
};

export const NO_PROMPT = 'Routine has no prompt — set the prompt in Edit';

// ---- schedules: 5-field cron, or daily / hourly / Nh ----------------------------------------------------------------

export type RoutineScheduleVerdict = { ok: true; cron: string; tz: string; next: Date } | { ok: false; error: string };

/**
 * A routine's schedule: strict 5-field cron (refused as a job's would be), or the shorthands `daily` (09:00), `hourly`
 * and `Nh` (every N hours, N from 1 to 24), with no two fires closer than the floor.
 */
export function checkRoutineSchedule(
  expr: string,
  tz: string,
  now: Date,
  floorMs: number = ROUTINES.defaultFloorMs,
): RoutineScheduleVerdict {
  const zone = canonicalTimeZone(tz);
  if (!zone) return { ok: false, error: `"${tz}" is not an IANA time zone` };
  const e = expr.trim();
  const hours = /^(\d{1,2})h$/.exec(e);
  let cron: string;
  if (e === 'daily') cron = '0 9 * * *';
  else if (e === 'hourly') cron = '0 * * * *';
  else if (hours) {
    const n = Number(hours[1]);
    if (n < 1 || n > 24) return { ok: false, error: 'Nh takes N from 1 to 24' };
    cron = n === 24 ? '0 9 * * *' : `0 */${n} * * *`;
  } else if (e.startsWith('@'))
    return {
      ok: false,
      error: 'cron nicknames such as @daily are not accepted: write daily, hourly, Nh or the 5 fields',
    };
  else if (e.split(/\s+/).length !== 5)
    return { ok: false, error: 'a schedule is daily, hourly, Nh or a cron of exactly 5 fields' };
  else cron = e;
  const refusal = cronRefusal(cron);
  if (refusal) return { ok: false, error: refusal };
  let fires: Date[];
  try {
    fires = parseCron(cron, zone).nextRuns(6, now);
  } catch (err) {
    return { ok: false, error: `the schedule does not parse: ${err instanceof Error ? err.message : String(err)}` };
  }
  if (fires.length === 0) return { ok: false, error: 'the schedule has no future fire' };
  for (let i = 1; i < fires.length; i++) {
    if (fires[i]!.getTime() - fires[i - 1]!.getTime() < floorMs)
      return { ok: false, error: `fires must be at least ${Math.round(floorMs / 60_000)} minutes apart` };
  }
  return { ok: true, cron, tz: zone, next: fires[0]! };
}

// ---- the prompt of a run ------------------------------------------------------------------------------------------

/** The routine's own playbook rule, then its prompt, then its label; none → the run fails without dispatch. */
export function routinePrompt(r: {
  playbook?: string | null;
  prompt?: string | null;
  label?: string | null;
}): { prompt: string } | { error: string } {
  for (const candidate of [r.playbook, r.prompt, r.label]) if (candidate?.trim()) return { prompt: candidate.trim() };
  return { error: NO_PROMPT };
}

// ---- tool selection -----------------------------------------------------------------------------------------------

export interface SavedTool {
  name: string;
  title: string;
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const words = (s: string) =>
  s
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w.length >= 3);

/**
 * Which saved tool a prompt asks for (tools oldest first): an exact mention of a tool's name or full title; else the
 * tool with the most title words (3+ letters, whole words) in the prompt, at least 2, ties to the older tool; else
 * none, and the run authors one. Whole words, unlike Wuphf's substrings, so "score" does not match "underscored".
 */
export function selectTool<T extends SavedTool>(prompt: string, tools: readonly T[]): T | undefined {
  const p = prompt.toLowerCase();
  const mentions = (s: string) =>
    s.trim() !== '' && new RegExp(`(^|[^a-z0-9_$])${escapeRegExp(s.toLowerCase())}($|[^a-z0-9_$])`).test(p);
  const exact = tools.find((t) => mentions(t.name) || mentions(t.title));
  if (exact) return exact;
  const promptWords = new Set(words(prompt));
  let best: T | undefined;
  let bestScore = 1;
  for (const t of tools) {
    const score = new Set(words(t.title).filter((w) => promptWords.has(w))).size;
    if (score > bestScore) {
      best = t;
      bestScore = score;
    }
  }
  return best;
}

// ---- authoring ----------------------------------------------------------------------------------------------------

export const AuthoredTool = z.object({
  name: z.string().regex(/^[A-Za-z_$][A-Za-z0-9_$]{0,63}$/, 'name must be a JavaScript identifier'),
  title: storableString().max(200),
  purpose: storableString().max(2000),
  inputs: z.array(z.string().regex(/^[A-Za-z_$][A-Za-z0-9_$]{0,63}$/)).max(20),
  code: storableString().min(1).max(100_000),
});
export type AuthoredTool = z.infer<typeof AuthoredTool>;

/** The first balanced JSON object in a model's reply, as a tool; a missing title or purpose is derived. */
export function parseAuthoredTool(reply: string): { ok: true; tool: AuthoredTool } | { ok: false; error: string } {
  const start = reply.indexOf('{');
  if (start < 0) return { ok: false, error: 'the answer holds no JSON object' };
  let depth = 0;
  let inString = false;
  let end = -1;
  for (let i = start; i < reply.length && end < 0; i++) {
    const ch = reply[i];
    if (inString) {
      if (ch === '\\') i++;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === '{') depth++;
    else if (ch === '}' && --depth === 0) end = i;
  }
  if (end < 0) return { ok: false, error: 'the JSON object is not closed' };
  let raw: unknown;
  try {
    raw = JSON.parse(reply.slice(start, end + 1));
  } catch (err) {
    return { ok: false, error: `the JSON does not parse: ${err instanceof Error ? err.message : String(err)}` };
  }
  const o = (raw ?? {}) as Record<string, unknown>;
  const name = typeof o.name === 'string' ? o.name : '';
  const purpose = typeof o.purpose === 'string' && o.purpose ? o.purpose : typeof o.title === 'string' ? o.title : name;
  const parsed = AuthoredTool.safeParse({
    ...o,
    title: typeof o.title === 'string' && o.title ? o.title : name,
    purpose,
    inputs: o.inputs ?? [],
  });
  if (!parsed.success)
    return {
      ok: false,
      error: parsed.error.issues.map((i) => `${i.path.join('.') || 'tool'}: ${i.message}`).join('; '),
    };
  return { ok: true, tool: parsed.data };
}

/** The capabilities a tool may call, by their dotted names. */
export const CAPABILITIES = [
  'data.list',
  'data.get',
  'data.upsert',
  'ai.score',
  'ai.summarize',
  'ai.write',
  'integrations.call',
  'send',
  'browser',
] as const;
export type Capability = (typeof CAPABILITIES)[number];
/** Capabilities whose effect waits for a human's approval. */
export const GATED_CAPABILITIES: readonly Capability[] = ['send', 'browser'];

/** Static check: every capability the code calls exists. Returns the unknown ones. */
export function unknownCapabilities(code: string): string[] {
  const known = new Set<string>(CAPABILITIES);
  const calls = [...code.matchAll(/\b((?:data|ai|integrations)\.[A-Za-z_$][\w$]*|send|browser)\s*\(/g)].map(
    (m) => m[1]!,
  );
  return [...new Set(calls.filter((c) => !known.has(c)))];
}

/** Placeholder arguments for a smoke run, by input name. */
export function placeholderFor(input: string): string {
  const n = input.toLowerCase();
  if (n.includes('email')) return 'sample@example.com';
  if (/date|since|due/.test(n)) return '2026-01-15';
  if (/count|amount|score|price/.test(n)) return '10';
  if (/^id$|_id$|[a-z0-9]Id$/.test(input)) return 'rec-1';
  if (/name|title/.test(n)) return 'Sample Record';
  if (/rubric|style|tone/.test(n)) return 'priority';
  return 'sample';
}

/** A smoke-run failure that gets one repair: a crash of the code itself, not a gate or a time limit. */
export function isCrash(detail: string): boolean {
  const d = detail.slice(0, ROUTINES.crashDetailChars);
  return /is not a function|is not defined|undefined is not|Cannot read|SyntaxError|ReferenceError|TypeError/.test(d);
}

// ---- routines and their runs --------------------------------------------------------------------------------------

/** A routine as the API takes it; `delivery` is where `send` goes (the agent's owner delivery when absent). */
export const RoutineDefinition = z
  .object({
    label: storableString().max(200),
    schedule: z.object({ expr: z.string().min(1).max(200), tz: z.string().min(1).max(64).optional() }).strict(),
    prompt: storableString().max(32_768).optional(),
    playbook: storableString().max(32_768).optional(),
    delivery: Delivery.optional(),
    /** The routine's own budget for each run, in USD, instead of the agent's perRoutineRunUsd (docs/spend.md). */
    budgetUsd: BudgetUsd.optional(),
  })
  .strict();
export type RoutineDefinition = z.infer<typeof RoutineDefinition>;

export type RoutineStatus = 'active' | 'paused';
export const RUN_STATUSES = ['running', 'ok', 'needs_approval', 'rejected', 'error'] as const;
export type RoutineRunStatus = (typeof RUN_STATUSES)[number];
/** What a run comes to: the result of the workflow and of the API's runs list. */
export type FinishedRunStatus = Exclude<RoutineRunStatus, 'running' | 'needs_approval'>;

/** The playbook log's words for a run (Wuphf's mapping): a run paused for approval is partial. */
export function playbookOutcome(status: RoutineRunStatus): 'success' | 'partial' | 'aborted' | null {
  if (status === 'ok') return 'success';
  if (status === 'needs_approval') return 'partial';
  if (status === 'running') return null;
  return 'aborted';
}

/** A gated capability stopped the run: what it would do, for the human who decides. */
export interface Gate {
  capability: Capability;
  detail: string;
}

/** The result of a run, as Wuphf's agent service answered it. */
export interface RoutineRunResult {
  status: 'ok' | 'needs_approval' | 'rejected' | 'error';
  digest: string;
  sessionId: string;
}

/** The arguments a routine passes to its tool: the prompt as `input`, "" for every other declared input. */
export function toolArguments(inputs: readonly string[], prompt: string): Record<string, string> {
  return Object.fromEntries(inputs.map((name) => [name, name === 'input' ? prompt : '']));
}

/** Placeholder arguments for a smoke run. */
export function placeholderArguments(inputs: readonly string[]): Record<string, string> {
  return Object.fromEntries(inputs.map((name) => [name, placeholderFor(name)]));
}

/** Artifact titles: `<kebab-name>-run-<n>.md`. */
export function artifactTitle(producedBy: string, n: number): string {
  const kebab = producedBy
    .replace(/([a-z0-9])([A-Z])/g, '$1-$2')
    .replace(/[^A-Za-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')
    .toLowerCase();
  return `${kebab || 'routine'}-run-${n}.md`;
}
