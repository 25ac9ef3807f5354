import { expect } from 'vitest';
import { createAnthropicProvider } from '../../adapters/model/anthropic';
import type { ModelProvider } from '../../domain/model';
import { loopbackEgress } from './egress';
import type { FakeAnthropic } from './fake-anthropic';
import { eventually, type TestKeel } from './keel';
import type { ShopHttp } from './mcp-shop';

/** An evaluation as the API answers it, with what the tests read of it. */
export interface Evaluation {
  id: string;
  status: string;
  summary: { cases: number; passed: number; failed: number; modelCalls: number; costUsd: number } | null;
  cases: {
    caseId: string;
    status: string;
    result: {
      passed: boolean;
      reasons: string[];
      modelCalls: number;
      costUsd: number;
      changedTurns: number[];
      toolCallDiff: { turn: number; added: string[]; removed: string[] }[];
      firstDivergence?: { turn: number; callIndex: number; part: string; diff: string };
    } | null;
  }[];
}

/** Starts an evaluation of the agent's and answers it once it has ended. */
export async function evaluate(keel: TestKeel, agent: string, body: Record<string, unknown>): Promise<Evaluation> {
  const started = await keel.call<Evaluation>('POST', `/v1/agents/${agent}/evals`, body);
  expect(started.status, started.raw).toBe(202);
  return endedEval(keel, agent, started.body.id);
}

/** The evaluation once it is no longer running. */
export function endedEval(keel: TestKeel, agent: string, evalId: string, timeoutMs = 120_000): Promise<Evaluation> {
  return eventually(
    async () => {
      const got = await keel.call<Evaluation>('GET', `/v1/agents/${agent}/evals/${evalId}`);
      return got.body.status === 'running' ? undefined : got.body;
    },
    timeoutMs,
    'the evaluation to end',
  );
}

/** The shop as the agent's tool server `shop`, its credentials in a header. */
export async function connectShop(keel: TestKeel, agent: string, shop: ShopHttp, token: string): Promise<void> {
  const put = await keel.call('PUT', `/v1/agents/${agent}/tool-servers/shop`, {
    url: shop.url,
    headers: { authorization: `Bearer ${token}` },
  });
  expect(put.status, put.raw).toBe(201);
}

/** The real Anthropic provider against the local Messages API. */
export const fakeAnthropicModel = (fake: FakeAnthropic): ModelProvider =>
  createAnthropicProvider({
    apiKey: 'sk-test-not-real',
    baseURL: fake.url,
    defaultModel: 'claude-test',
    egress: loopbackEgress,
  });
