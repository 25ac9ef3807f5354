import type { Check } from '../../domain/admission';
import type { ProposalEdit } from '../../domain/reflection';
import { eventually, type TestKeel } from './keel';

export interface ProposalView {
  id: string;
  status: string;
  checks: Check[];
  version?: number;
  conversationIds: string[];
}

export interface ReflectionView {
  queued: { conversationId: string; failures: number }[];
  drains: number;
  lastDrain: { outcome: string; status?: string } | null;
  poisoned: { conversationId: string; failures: number }[];
  gateLog: { conversationId: string; evolve: boolean }[];
  spentTodayUsd: number;
}

const fullEdits = (edits: Partial<ProposalEdit>[]) =>
  edits.map((e) => ({ action: 'edit', summary: 's', rationale: 'r', ...e }));

/** A user message that makes the scripted model propose these edits when reflection reads it. */
export const propose = (edits: Partial<ProposalEdit>[]) =>
  `/propose ${JSON.stringify({ status: 'ok', edits: fullEdits(edits) })}`;

/** A user message that makes the scripted model answer `skip`, with edits attached that a skip must never apply. */
export const skipWithEdits = (edits: Partial<ProposalEdit>[]) =>
  `/propose ${JSON.stringify({ status: 'skip', reason: 'nothing to learn', edits: fullEdits(edits) })}`;

export function reflectionApi(keel: () => TestKeel) {
  const call = async <T>(
    method: 'GET' | 'POST' | 'PUT',
    url: string,
    body?: unknown,
  ): Promise<{ status: number; body: T }> => {
    const res = await keel().api.inject({
      method,
      url,
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) }),
    });
    return { status: res.statusCode, body: res.json<T>() };
  };
  const proposals = async (a: string) => (await call<ProposalView[]>('GET', `/v1/agents/${a}/proposals?all=true`)).body;
  return {
    call,
    proposals,
    memory: async (a: string) =>
      (await call<{ version: number; files: Record<string, string> }>('GET', `/v1/agents/${a}/memory`)).body,
    state: async (a: string) => (await call<ReflectionView>('GET', `/v1/agents/${a}/reflection`)).body,
    /** An agent that learns from its conversations. */
    agent: (a: string) => call('PUT', `/v1/agents/${a}`, { name: a, reflection: { enabled: true } }),
    /** One user turn, awaited to its reply. */
    async say(a: string, c: string, text: string) {
      const res = await keel().post(a, c, { text }, { wait: 30 });
      if (res.body.status !== 'replied') throw new Error(`turn not replied: ${JSON.stringify(res.body)}`);
    },
    /** The proposal that a drain produced, once it has (n: how many proposals there are by then). */
    nthProposal: (a: string, n: number, what = `proposal ${n}`) =>
      eventually(
        async () => {
          const all = await proposals(a);
          return all.length >= n ? all[all.length - n] : undefined;
        },
        60_000,
        what,
      ),
  };
}

export const failedChecks = (p: { checks: Check[] }) =>
  p.checks.filter((c) => c.kind === 'hard' && !c.passed).map((c) => c.name);
