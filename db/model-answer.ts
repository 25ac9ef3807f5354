import type { CallSpend } from '../domain/model';
import { entriesJson, type NewTranscriptEntry } from './conversations';
import { modelCallSql, type ModelCallRecord } from './model-calls';
import type { Queryable } from './pool';
import { SETTLED_SPEND_JSON, settleSql, spendOf, type Settle, type SpendRow } from './spend';

/**
 * A model's answer committed in one statement, where a transaction took five round trips: appended to its transcript
 * (keel_append_transcript locks the conversation first), its attempt's model_calls row, and its spend settled once the
 * append has run (the spend rows are locked second, as in the transaction before). Answers the answer's seq, whether
 * this attempt added it (an earlier attempt's answer stays), and the spend (none when this attempt had settled).
 */
export async function commitModelAnswer(
  db: Queryable,
  a: { conversationKey: string; turnId: string; entry: NewTranscriptEntry; call: ModelCallRecord; settle: Settle },
): Promise<{ seq: number; added: boolean; spend?: CallSpend }> {
  const call = modelCallSql(4, a.call);
  const settle = settleSql(4 + call.params.length, a.settle, 'appended');
  const { rows } = await db.query<{ seq: number; added: boolean; spend: SpendRow | null }>(
    `WITH appended AS (SELECT seq, added FROM keel_append_transcript($1, $2, $3::jsonb)),
          recorded AS (${call.sql}),
          ${settle.sql}
     SELECT seq, added, ${SETTLED_SPEND_JSON} AS spend FROM appended`,
    [a.conversationKey, a.turnId, entriesJson([a.entry]), ...call.params, ...settle.params],
  );
  const row = rows[0]!;
  return { seq: row.seq, added: row.added, ...(row.spend ? { spend: spendOf(row.spend) } : {}) };
}
