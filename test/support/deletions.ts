import type { Pool } from '../../db/pool';
import { eventually, type TestKeel } from './keel';

/** A deletion as the API answers it. */
export interface Deletion {
  deletionId: string;
  agentId: string;
  conversationId: string | null;
  status: 'running' | 'finished' | 'failed';
  outcome: { conversations: number; workflowsEnded: number; schedulesDeleted: number; rowsErased?: number } | null;
}

/** The deletion once it no longer runs. */
export async function finishedDeletion(keel: TestKeel, agentId: string, deletionId: string): Promise<Deletion> {
  return eventually(
    async () => {
      const res = await keel.call<Deletion>('GET', `/v1/agents/${agentId}/deletions/${deletionId}`);
      return res.body.status === 'running' ? undefined : res.body;
    },
    120_000,
    'the deletion to finish',
  );
}

/** Every table of Keel's schema whose rows mention `text` anywhere in a row's text, with how many rows. */
export async function rowsMentioning(pool: Pool, text: string): Promise<Record<string, number>> {
  const { rows: tables } = await pool.query<{ name: string }>(
    `SELECT table_name AS name FROM information_schema.tables
      WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1`,
  );
  const found: Record<string, number> = {};
  for (const { name } of tables) {
    const { rows } = await pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM "${name}" x WHERE strpos(x::text, $1) > 0`,
      [text],
    );
    if (rows[0]!.n !== '0') found[name] = Number(rows[0]!.n);
  }
  return found;
}
