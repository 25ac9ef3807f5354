import path from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { migrate } from '../db/migrate';
import { conversationWorkflowId, delegateWorkflowId } from '../domain/ids';
import { freePort } from '../scripts/ports';
import { startPostgresProcess, type PostgresProcess } from '../scripts/postgres-process';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { quiescent } from './support/quiescence';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
});

/** The delegate's terminal commit while it is in flight: its attempt and the last failure. */
async function pendingCommit(keel: TestKeel, workflowId: string) {
  const { raw } = await keel.client.workflow.getHandle(workflowId).describe();
  const commit = raw.pendingActivities?.find((p) => p.activityType?.name === 'commitDelegateOutcome');
  return commit ? { attempt: commit.attempt ?? 0, lastFailure: commit.lastFailure?.message ?? '' } : undefined;
}

interface DelegateView {
  outcome?: Record<string, unknown>;
  relay?: string;
  admissions: { decision: string; via: string }[];
}

async function relays(keel: TestKeel, conversationKey: string): Promise<string[]> {
  const { rows } = await keel.pool.query<{ text: string }>(
    `SELECT text FROM messages
      WHERE conversation_key = $1 AND role = 'assistant' AND text LIKE 'relay: %' ORDER BY seq`,
    [conversationKey],
  );
  return rows.map((r) => r.text);
}

describe("a delegate's terminal commit that fails", () => {
  it('is retried until it lands; the delegate’s own signal brings the result, which is relayed once', async () => {
    // A PostgreSQL of this test's own, which it stops (the run's shared one stays up for the other tests).
    const dataDir = path.join(inject('workDir'), `pg-commit-${uniqueId('x')}`);
    const port = await freePort();
    let db: PostgresProcess = await startPostgresProcess({ dataDir, port });
    cleanups.push(() => db.stop());
    await migrate(db.url);
    const keel = await startTestKeel({ databaseUrl: db.url });
    cleanups.push(() => keel.stop());
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const key = conversationWorkflowId(a, c);

    const spawn = { text: '/tool spawn_delegate {"text":"/delay 3000 committed late","historyMode":"clean"}' };
    const spawned = await keel.post(a, c, spawn, { wait: 30 });
    const delegateId = /spawned delegate (\S+)/.exec(spawned.body.reply?.text ?? '')![1]!;
    const delegateKey = delegateWorkflowId(a, delegateId);

    // The delegate's row is held while it works, so that its terminal commit is in flight (waiting for the row)
    // when PostgreSQL goes away.
    const holder = new pg.Client({ connectionString: db.url });
    holder.on('error', () => undefined); // its connection dies with the server
    await holder.connect();
    cleanups.push(() => holder.end());
    await holder.query('BEGIN');
    await holder.query('SELECT 1 FROM delegates WHERE delegate_id = $1 FOR UPDATE', [delegateId]);
    await eventually(() => pendingCommit(keel, delegateKey), 30_000, 'the terminal commit to be in flight');
    await eventually(
      async () => {
        const { rows } = await keel.pool.query<{ n: string }>('SELECT count(*) AS n FROM pg_locks WHERE NOT granted');
        return Number(rows[0]!.n) > 0;
      },
      30_000,
      'the commit to wait for the row',
    );

    await db.crash();
    // Down until the commit has failed three times (the first attempt lost its connection, the next found no server).
    const failing = await eventually(
      async () => {
        const p = await pendingCommit(keel, delegateKey);
        return p && p.attempt >= 4 ? p : undefined;
      },
      60_000,
      'the commit to have failed three times',
    );
    expect(failing.lastFailure).not.toBe('');
    db = await startPostgresProcess({ dataDir, port });

    await eventually(async () => (await relays(keel, key).catch(() => [])).length > 0, 60_000, 'the relay');
    const d = await eventually(
      async () => {
        const res = await keel.api.inject({ method: 'GET', url: `/v1/agents/${a}/delegates/${delegateId}` });
        const v = res.json<DelegateView>();
        return v.relay ? v : undefined;
      },
      30_000,
      'the relay to be recorded',
    );
    expect(d.outcome).toMatchObject({
      kind: 'success',
      result: 'done: committed late',
      outcomeVersion: 1,
      terminalOwner: 'delegate',
    });
    expect(d.relay).toBe('relayed');

    // The commit landed on a retry: the delegate's history has one commit, started for the last time at attempt 4+.
    const history = await keel.client.workflow.getHandle(delegateKey).fetchHistory();
    const events = history.events ?? [];
    const commitIds = events.flatMap((e) =>
      e.activityTaskScheduledEventAttributes?.activityType?.name === 'commitDelegateOutcome' ? [String(e.eventId)] : [],
    );
    expect(commitIds).toHaveLength(1);
    const started = events.find((e) => String(e.activityTaskStartedEventAttributes?.scheduledEventId) === commitIds[0]);
    expect(started?.activityTaskStartedEventAttributes?.attempt).toBeGreaterThanOrEqual(4);

    // Its own signal brought the result: the conversation was signalled, and the one admission came by that signal
    // (no reconciliation ran: the next one was a minute away, and no turn ended meanwhile).
    const conversation = (await keel.client.workflow.getHandle(key).fetchHistory()).events ?? [];
    const signals = conversation.filter(
      (e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'delegateFinished',
    );
    expect(signals).toHaveLength(1);
    expect(d.admissions.map((x) => [x.decision, x.via])).toEqual([['admitted', 'signal']]);

    // Relayed once: counted when the delegate has closed and the conversation is at rest.
    await keel.client.workflow.getHandle(delegateKey).result();
    await eventually(() => quiescent(keel.client, key), 30_000, 'the conversation at rest');
    expect(await relays(keel, key)).toEqual([`relay: ${delegateId} success: done: committed late`]);
  }, 180_000);
});
