import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { conversationWorkflowId, delegateWorkflowId } from '../domain/ids';
import { WORKFLOWS_PATH } from '../worker/bundle';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { quiescent } from './support/quiescence';

let keel: TestKeel;

beforeAll(async () => {
  // This test's workflow code drops every delegate completion signal (test/support/drop-delegate-signals.ts).
  const { code } = await bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    workflowInterceptorModules: [path.join(__dirname, 'support', 'drop-delegate-signals.ts')],
    logger: {
      trace: () => undefined,
      debug: () => undefined,
      info: () => undefined,
      warn: () => undefined,
      error: (m: string) => console.error(m),
      log: () => undefined,
    },
  });
  const bundle = path.join(inject('workDir'), `bundle-drop-signals-${uniqueId('b')}.js`);
  await writeFile(bundle, code);
  keel = await startTestKeel({ workflowBundlePath: bundle });
});
afterAll(async () => keel?.stop());

describe('a lost completion signal', () => {
  it('loses nothing: at its next turn end the conversation reconciles from PostgreSQL and relays it once', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const spawned = await keel.post(
      a,
      c,
      { text: '/tool spawn_delegate {"text":"/delay 1500 found it","historyMode":"clean"}' },
      { wait: 30 },
    );
    const delegateId = /spawned delegate (\S+)/.exec(spawned.body.reply?.text ?? '')![1]!;
    // The outcome is committed, but no signal arrives.
    await eventually(
      async () => {
        const { rows } = await keel.pool.query<{ completed_at: Date | null }>(
          'SELECT completed_at FROM delegates WHERE delegate_id = $1',
          [delegateId],
        );
        return rows[0]?.completed_at ?? undefined;
      },
      30_000,
      'the committed outcome',
    );

    const next = await keel.post(a, c, { text: 'any news?' }, { wait: 30 });
    expect(next.body.reply?.text).toBe('echo: any news?');
    const readRelays = async () => {
      const { rows } = await keel.pool.query<{ text: string }>(
        `SELECT text FROM messages WHERE conversation_key = $1 AND role = 'assistant' AND text LIKE 'relay: %'`,
        [conversationWorkflowId(a, c)],
      );
      return rows.map((r) => r.text);
    };
    await eventually(async () => (await readRelays()).length === 1, 30_000, 'the relay');
    expect(await readRelays()).toEqual([`relay: ${delegateId} success: done: found it`]);
    const { rows } = await keel.pool.query<{ decision: string; via: string }>(
      'SELECT decision, via FROM delegate_admissions WHERE delegate_id = $1',
      [delegateId],
    );
    expect(rows).toEqual([{ decision: 'admitted', via: 'reconcile' }]);
    // And only once, however many turns end afterwards: counted once the delegate has closed and the conversation
    // is at rest (a second admission would have left a relay waiting out its 500 ms, or a relay turn running).
    await keel.post(a, c, { text: 'and now?' }, { wait: 30 });
    await keel.client.workflow.getHandle(delegateWorkflowId(a, delegateId)).result();
    await eventually(() => quiescent(keel.client, conversationWorkflowId(a, c)), 30_000, 'the conversation at rest');
    expect(await readRelays()).toHaveLength(1);
  });
});
