import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { ContentBlock, ModelMessage } from '../domain/model';
import { scriptedPlan } from '../domain/scripted-model';

/**
 * The activities of the benchmark's comparison workflows. `modelWithTranscript` is the design most integrations use:
 * the whole transcript travels as the activity's input (and so into workflow history) on every model call. `noop`
 * does nothing: a chain of them is the floor any design on Temporal pays for the same number of steps.
 */
export const baselineActivities = {
  async modelWithTranscript(input: { messages: ModelMessage[]; callIndex: number }): Promise<ContentBlock[]> {
    const plan = scriptedPlan(input.messages, input.callIndex);
    return plan.kind === 'respond' ? plan.content : [{ type: 'text', text: 'error' }];
  },
  async deliver(_input: { text: string }): Promise<{ outcome: string }> {
    return { outcome: 'skipped:channel_none' };
  },
  async noop(): Promise<void> {},
  /** The shop's read-only tool through one live MCP session per server, as a worker keeps them. */
  async callShop(input: { url: string; orderId: string }): Promise<string> {
    const session = await shopSession(input.url);
    const result = await session.callTool({ name: 'lookup_order', arguments: { orderId: input.orderId } });
    const first = (result.content as { type: string; text?: string }[])[0];
    return first?.text ?? '';
  },
};

const sessions = new Map<string, Promise<Client>>();

function shopSession(url: string): Promise<Client> {
  let session = sessions.get(url);
  if (!session) {
    const client = new Client({ name: 'bench-floor', version: '1.0.0' });
    session = client.connect(new StreamableHTTPClientTransport(new URL(url))).then(() => client);
    sessions.set(url, session);
  }
  return session;
}

export type BaselineActivities = typeof baselineActivities;
