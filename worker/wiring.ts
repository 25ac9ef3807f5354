/** The worker's wiring from the configuration: the model provider and the delivery transports its activities use. */
import type { Transports } from '../activities/delivery/deliver-reply';
import { noneTransport } from '../activities/delivery/none';
import { slackTransport } from '../activities/delivery/slack';
import { webhookTransport } from '../activities/delivery/webhook';
import { createAnthropicProvider } from '../activities/model/anthropic';
import { createScriptedProvider } from '../activities/model/scripted';
import type { Pool } from '../db/pool';
import type { KeelConfig } from '../domain/config';
import type { ModelProvider } from '../domain/model';

/** The provider KEEL_MODEL (or the presence of ANTHROPIC_API_KEY) selects. */
export function providerFromConfig(config: KeelConfig, pool: Pool): ModelProvider {
  if (config.model.provider === 'scripted') return createScriptedProvider(pool);
  if (!config.model.anthropicApiKey) throw new Error('KEEL_MODEL=anthropic needs ANTHROPIC_API_KEY');
  return createAnthropicProvider({
    apiKey: config.model.anthropicApiKey,
    baseURL: config.model.anthropicBaseUrl,
    defaultModel: config.model.anthropicModel,
  });
}

export function transportsFromConfig(config: KeelConfig): Transports {
  return { none: noneTransport(), webhook: webhookTransport(), slack: slackTransport(config.slack) };
}

/** The model name recorded for calls when the agent names none. */
export function defaultModelName(config: KeelConfig): string {
  return config.model.provider === 'scripted' ? 'scripted' : config.model.anthropicModel;
}
