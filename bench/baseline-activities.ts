import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import pg from 'pg';
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
  /**
   * The least a durable job run does, with nothing of Keel's: its run claimed, the model's answer committed with its
   * delivery's ledger row begun, one POST to the job's webhook, and the send settled with the run booked. Three
   * statements and one request, where Keel's run also streams, meters, guards and records its turn.
   */
  async durableRun(input: { runId: string; url: string }): Promise<void> {
    const db = durableDb();
    const claimed = await db.query(
      `INSERT INTO ${DURABLE_FLOOR_TABLES.runs} (run_id) VALUES ($1) ON CONFLICT (run_id) DO NOTHING RETURNING run_id`,
      [input.runId],
    );
    if (claimed.rowCount === 0) return;
    const text = `report for ${input.runId}`;
    await db.query(
      `WITH answered AS (UPDATE ${DURABLE_FLOOR_TABLES.runs} SET answer = $2 WHERE run_id = $1)
       INSERT INTO ${DURABLE_FLOOR_TABLES.effects} (key) VALUES ($1)
       ON CONFLICT (key) DO UPDATE SET attempts = ${DURABLE_FLOOR_TABLES.effects}.attempts + 1`,
      [input.runId, text],
    );
    const res = await fetch(input.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': input.runId },
      body: JSON.stringify({ runId: input.runId, text }),
    });
    await res.body?.cancel();
    await db.query(
      `WITH settled AS (UPDATE ${DURABLE_FLOOR_TABLES.effects} SET status = $2 WHERE key = $1)
       UPDATE ${DURABLE_FLOOR_TABLES.runs} SET status = 'ok', finished_at = now() WHERE run_id = $1`,
      [input.runId, `http_${res.status}`],
    );
  },
  /** The shop's read-only tool through one live MCP session per server, as a worker keeps them. */
  async callShop(input: { url: string; orderId: string }): Promise<string> {
    const session = await shopSession(input.url);
    const result = await session.callTool({ name: 'lookup_order', arguments: { orderId: input.orderId } });
    const first = (result.content as { type: string; text?: string }[])[0];
    return first?.text ?? '';
  },
};

/** The durable floor's tables (bench/burst.ts creates and drops them): a run's row and its delivery's ledger row. */
export const DURABLE_FLOOR_TABLES = { runs: 'bench_floor_runs', effects: 'bench_floor_effects' } as const;

let durablePool: pg.Pool | undefined;

/** The bench worker's PostgreSQL pool, Keel's worker's size (db/pool.ts), opened at the first durable run. */
function durableDb(): pg.Pool {
  const url = process.env.BENCH_DATABASE_URL;
  if (!url) throw new Error('the durable floor needs BENCH_DATABASE_URL');
  durablePool ??= new pg.Pool({ connectionString: url, max: 10 });
  return durablePool;
}

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
