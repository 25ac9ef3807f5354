/**
 * What model calls cost and what they may spend: the price table, a call's worst case, and which budgets a call
 * counts against. Pure rules; the ledger that enforces them is db/spend.ts.
 */
import { z } from 'zod';
import type { ModelRequest, ModelUsage } from './model';

/** USD per million tokens, as providers publish them. */
export interface ModelPrice {
  input: number;
  output: number;
  cacheRead: number;
  cacheWrite: number;
}

export const ModelPriceSchema = z
  .object({
    input: z.number().nonnegative(),
    output: z.number().nonnegative(),
    cacheRead: z.number().nonnegative().optional(),
    cacheWrite: z.number().nonnegative().optional(),
  })
  .strict()
  .transform((p): ModelPrice => ({
    ...p,
    cacheRead: p.cacheRead ?? p.input / 10,
    cacheWrite: p.cacheWrite ?? p.input * 1.25,
  }));

/**
 * Anthropic's list prices (USD per million tokens; cache reads at a tenth of input, 5-minute cache writes at 1.25×).
 * `*` prices any model not named here, so that an unknown model is never free; the scripted model is priced as
 * Sonnet so that offline runs show realistic figures. KEEL_MODEL_PRICES adds or replaces entries.
 */
export const MODEL_PRICES: Readonly<Record<string, ModelPrice>> = {
  'claude-opus-4-1': { input: 15, output: 75, cacheRead: 1.5, cacheWrite: 18.75 },
  'claude-opus-4-5': { input: 5, output: 25, cacheRead: 0.5, cacheWrite: 6.25 },
  'claude-sonnet-4-5': { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
  'claude-sonnet-4': { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
  'claude-haiku-4-5': { input: 1, output: 5, cacheRead: 0.1, cacheWrite: 1.25 },
  'claude-3-5-haiku-latest': { input: 0.8, output: 4, cacheRead: 0.08, cacheWrite: 1 },
  scripted: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
  '*': { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 },
};

export type PriceTable = Readonly<Record<string, ModelPrice>>;

export function priceOf(prices: PriceTable, model: string): ModelPrice {
  return prices[model] ?? prices['*'] ?? MODEL_PRICES['*']!;
}

/** What a call's usage cost, in USD. */
export function costOf(usage: ModelUsage, price: ModelPrice): number {
  return (
    (usage.inputTokens * price.input +
      usage.outputTokens * price.output +
      usage.cacheReadTokens * price.cacheRead +
      usage.cacheWriteTokens * price.cacheWrite) /
    1_000_000
  );
}

/** About one token per 4 characters: how the scripted model bills, and how a call's input is estimated beforehand. */
export const tokensOfChars = (chars: number): number => Math.ceil(chars / 4);

/** The input tokens of a request, estimated from its characters (system, messages and tool definitions). */
export function estimatedInputTokens(request: Pick<ModelRequest, 'system' | 'messages' | 'tools'>): number {
  return tokensOfChars(
    request.system.length + JSON.stringify(request.messages).length + JSON.stringify(request.tools).length,
  );
}

/**
 * The most a call can cost: its input (every token written to the cache, the dearest way in) and `max_tokens` of
 * output. This is what is reserved before the call.
 */
export function worstCaseUsd(call: { inputTokens: number; maxTokens: number }, price: ModelPrice) {
  return (call.inputTokens * Math.max(price.input, price.cacheWrite) + call.maxTokens * price.output) / 1_000_000;
}

// ---- budgets --------------------------------------------------------------------------------------------------------

export const BUDGET_NAMES = [
  'dailyUsd',
  'monthlyUsd',
  'perTurnUsd',
  'perDelegateTreeUsd',
  'perJobRunUsd',
  'perRoutineRunUsd',
] as const;
export type BudgetName = (typeof BUDGET_NAMES)[number];

/** An agent's budgets, in USD; an absent one does not limit. */
export type Budgets = Partial<Record<BudgetName, number>>;

/** An amount a budget may be set to, in USD. */
export const BudgetUsd = z.number().nonnegative().max(1_000_000);
export const BudgetsSchema = z
  .object({
    dailyUsd: BudgetUsd.optional(),
    monthlyUsd: BudgetUsd.optional(),
    perTurnUsd: BudgetUsd.optional(),
    perDelegateTreeUsd: BudgetUsd.optional(),
    perJobRunUsd: BudgetUsd.optional(),
    perRoutineRunUsd: BudgetUsd.optional(),
  })
  .strict();

/** What a model call is for: its kind (the metric's label) and whatever it belongs to. */
export type SpendKind =
  'turn' | 'delegate' | 'job' | 'routine' | 'authoring' | 'reflection' | 'gate' | 'judge' | 'eval';

export interface Payer {
  agentId: string;
  kind: SpendKind;
  conversationKey?: string;
  turnId?: string;
  delegateId?: string;
  /** A delegate's tree: the conversation that spawned it, whose budget its whole tree shares. */
  rootConversationKey?: string;
  jobId?: string;
  jobRunId?: string;
  routineRunId?: string;
  proposalId?: string;
}

/** Where a budget counts: the agent's calls in a calendar period (UTC), or the calls of one turn, tree or run. */
export type BudgetScope =
  | { period: 'day' | 'month'; since: Date }
  | { column: 'turn_id' | 'delegate_id' | 'job_run_id' | 'routine_run_id'; value: string };

export interface BudgetLimit {
  name: BudgetName;
  limitUsd: number;
  scope: BudgetScope;
}

/**
 * The budgets one call counts against: the agent's daily and monthly ones always, and the one of what it belongs to.
 * A job's or routine's own budget replaces the agent's per-run one for its runs.
 */
export function budgetsFor(payer: Payer, budgets: Budgets, now: Date, own?: { perRunUsd?: number }): BudgetLimit[] {
  const out: BudgetLimit[] = [];
  const add = (name: BudgetName, limit: number | undefined, scope: BudgetScope | undefined) => {
    if (limit !== undefined && scope) out.push({ name, limitUsd: limit, scope });
  };
  add('dailyUsd', budgets.dailyUsd, { period: 'day', since: startOfDay(now) });
  add('monthlyUsd', budgets.monthlyUsd, { period: 'month', since: startOfMonth(now) });
  if (payer.kind === 'turn' && payer.turnId)
    add('perTurnUsd', budgets.perTurnUsd, { column: 'turn_id', value: payer.turnId });
  if (payer.delegateId) {
    add('perDelegateTreeUsd', budgets.perDelegateTreeUsd, { column: 'delegate_id', value: payer.delegateId });
  }
  if (payer.jobRunId) {
    add('perJobRunUsd', own?.perRunUsd ?? budgets.perJobRunUsd, { column: 'job_run_id', value: payer.jobRunId });
  }
  if (payer.routineRunId) {
    const scope = { column: 'routine_run_id' as const, value: payer.routineRunId };
    add('perRoutineRunUsd', own?.perRunUsd ?? budgets.perRoutineRunUsd, scope);
  }
  return out;
}

/** The period a budget's stop is told to the owner once in: the day, the month, or the one turn, delegate or run. */
export function budgetPeriodKey(b: BudgetLimit): string {
  if ('period' in b.scope) {
    const iso = b.scope.since.toISOString();
    return `${b.name}:${b.scope.period === 'day' ? iso.slice(0, 10) : iso.slice(0, 7)}`;
  }
  return `${b.name}:${b.scope.value}`;
}

export const startOfDay = (d: Date): Date => new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()));
export const startOfMonth = (d: Date): Date => new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1));

/** How a budget is named to a person: "the daily budget of $0.05". */
export function describeBudget(name: BudgetName, limitUsd: number): string {
  const words: Record<BudgetName, string> = {
    dailyUsd: 'daily budget',
    monthlyUsd: 'monthly budget',
    perTurnUsd: 'per-turn budget',
    perDelegateTreeUsd: 'per-delegate-tree budget',
    perJobRunUsd: 'per-job-run budget',
    perRoutineRunUsd: 'per-routine-run budget',
  };
  return `the ${words[name]} of ${formatUsd(limitUsd)}`;
}

export const formatUsd = (v: number): string => `$${v < 1 ? v.toFixed(4).replace(/0{1,2}$/, '') : v.toFixed(2)}`;

/**
 * A reservation whose call never settled stops counting after this: the model activity's start-to-close timeout
 * (10 minutes) has then ended the attempt that held it, and its retry reserves again under the same key.
 */
export const RESERVATION_HOLD_MS = 15 * 60_000;

/** A budget a call would overrun: what it had spent and held, and the call's worst case. */
export interface Overrun {
  name: BudgetName;
  limitUsd: number;
  spentUsd: number;
  heldUsd: number;
  neededUsd: number;
}

/** The reservation rule: a call may go ahead while what is spent, what is held and its worst case fit the limit. */
export function overrunOf(
  budget: { name: BudgetName; limitUsd: number },
  counted: { spentUsd: number; heldUsd: number },
  worstUsd: number,
): Overrun | undefined {
  if (counted.spentUsd + counted.heldUsd + worstUsd <= budget.limitUsd) return undefined;
  return { name: budget.name, limitUsd: budget.limitUsd, ...counted, neededUsd: worstUsd };
}

/** What a person and the model read when a call would overrun a budget. */
export function overrunMessage(o: Overrun): string {
  return (
    `${describeBudget(o.name, o.limitUsd)} is spent: ${formatUsd(o.spentUsd)} spent and ` +
    `${formatUsd(o.heldUsd)} reserved, and this call could cost up to ${formatUsd(o.neededUsd)}`
  );
}
