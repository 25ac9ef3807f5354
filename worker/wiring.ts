/** The worker's wiring from the configuration: the model provider and the delivery transports its activities use. */
import type { Transports } from '../adapters/delivery/transport';
import { noneTransport } from '../adapters/delivery/none';
import { slackTransport } from '../adapters/delivery/slack';
import { webhookTransport } from '../adapters/delivery/webhook';
import { createAnthropicProvider } from '../adapters/model/anthropic';
import { createScriptedProvider } from '../adapters/model/scripted';
import type { Pool } from '../db/pool';
import { takeScriptedResponse } from '../db/scripted-responses';
import type { KeelConfig } from '../domain/config';
import type { ModelProvider } from '../domain/model';
import { createEgressGuard, type EgressGuard } from '../adapters/egress';
import { ToolSessionPool } from '../adapters/mcp/sessions';

/** The worker's live sessions with tool servers: a few, each closed after five idle minutes. */
export function toolSessionPool(): ToolSessionPool {
  return new ToolSessionPool({ max: 32, idleMs: 5 * 60_000 });
}

/** The egress guard every outbound request of the worker goes through, with KEEL_EGRESS_ALLOW's exceptions. */
export function egressFromConfig(config: KeelConfig): EgressGuard {
  return createEgressGuard({ allow: config.egress.allow });
}

/** The scripted model, answering the responses queued in PostgreSQL first. */
export function scriptedProvider(pool: Pool): ModelProvider {
  return createScriptedProvider({
    take: (conversationKey, callKey) => takeScriptedResponse(pool, conversationKey, callKey),
  });
}

/** The provider KEEL_MODEL (or the presence of ANTHROPIC_API_KEY) selects. */
export function providerFromConfig(config: KeelConfig, pool: Pool, egress: EgressGuard): ModelProvider {
  if (config.model.provider === 'scripted') return scriptedProvider(pool);
  if (!config.model.anthropicApiKey) throw new Error('KEEL_MODEL=anthropic needs ANTHROPIC_API_KEY');
  return createAnthropicProvider({
    apiKey: config.model.anthropicApiKey,
    baseURL: config.model.anthropicBaseUrl,
    defaultModel: config.model.anthropicModel,
    egress,
  });
}

export function transportsFromConfig(config: KeelConfig, egress: EgressGuard): Transports {
  return {
    none: noneTransport(),
    webhook: webhookTransport({ egress }),
    slack: slackTransport({ ...config.slack, egress }),
  };
}

/** The model name recorded for calls when the agent names none. */
export function defaultModelName(config: KeelConfig): string {
  return config.model.provider === 'scripted' ? 'scripted' : config.model.anthropicModel;
}
