import { writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { conversationWorkflowId, delegateWorkflowId } from '../domain/ids';
import { bundleWorkflows } from '../worker/bundle';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';

// Issue 24: a delegate whose parent conversation cannot take its result still ends, its outcome committed and
// listed; nothing of the delegate waits on the stuck conversation. The console warns of the stuck conversation.
const CHROMIUM = process.env.KEEL_CHROMIUM ?? '/usr/bin/chromium';
let keel: TestKeel;

beforeAll(async () => {
  const code = await bundleWorkflows({
    workflowInterceptorModules: [path.join(__dirname, 'support', 'fail-on-delegate-signal.ts')],
  });
  const bundle = path.join(inject('workDir'), `${uniqueId('fail-on-delegate-signal')}.js`);
  await writeFile(bundle, code);
  keel = await startTestKeel({ workflowBundlePath: bundle });
}, 120_000);
afterAll(async () => keel?.stop());

interface DelegateView {
  lifecycle: string;
  outcome?: { kind: string; result: string };
  admittedAt?: string;
}

interface FailingRun {
  workflowId: string;
  workflowType: string;
  cause: string;
  attempt: number;
  lastMessage: string;
}

async function get<T>(url: string): Promise<T> {
  return (await keel.api.inject({ method: 'GET', url })).json<T>();
}

describe('a delegate whose conversation is stuck', () => {
  it('ends, and its outcome stays committed and listed while the conversation is failing', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const args = { text: '/delay 500 found it while the parent was stuck', historyMode: 'clean' };
    const spawned = await keel.post(a, c, { text: `/tool spawn_delegate ${JSON.stringify(args)}` }, { wait: 30 });
    const delegateId = /spawned delegate (\S+)/.exec(spawned.body.reply?.text ?? '')![1]!;

    // The delegate's workflow closes: it does not wait for the conversation to take its result.
    await keel.client.workflow.getHandle(delegateWorkflowId(a, delegateId)).result();

    const conversation = conversationWorkflowId(a, c);
    const failing = await eventually(
      async () => {
        const { runs } = await get<{ runs: FailingRun[] }>(`/v1/agents/${a}/failing-runs`);
        return runs.find((r) => r.workflowId === conversation);
      },
      60_000,
      'the conversation listed as failing',
    );
    expect(failing).toMatchObject({
      workflowType: 'conversationWorkflow',
      cause: 'error',
      lastMessage: 'test fault: this conversation cannot take a delegate result',
    });

    const listed = await get<{ items: (DelegateView & { delegateId: string })[] }>(
      `/v1/agents/${a}/delegates?status=success`,
    );
    expect(listed.items.map((d) => d.delegateId)).toEqual([delegateId]);
    const one = await get<DelegateView>(`/v1/agents/${a}/delegates/${delegateId}`);
    expect(one.outcome).toMatchObject({ kind: 'success', result: 'done: found it while the parent was stuck' });
    // Committed, never admitted: the stuck conversation took nothing.
    expect(one.admittedAt).toBeUndefined();

    // The console shows the stuck conversation above the agent's views.
    await keel.api.listen({ port: 0, host: '127.0.0.1' });
    const base = `http://127.0.0.1:${(keel.api.server.address() as AddressInfo).port}`;
    const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
    try {
      const page = await browser.newPage();
      await page.goto(`${base}/console/#/approvals`);
      await page.getByLabel('Agent').fill(a);
      await page.getByLabel('Agent').press('Enter');
      const warning = page.getByRole('alert', { name: 'Stuck runs' });
      await warning.waitFor();
      expect(await warning.innerText()).toMatch(
        new RegExp(
          `One run of agent ${a} cannot make progress:[\\s\\S]*${conversation} \\(conversationWorkflow\\): ` +
            'an error, attempt \\d+: test fault: this conversation cannot take a delegate result',
        ),
      );
    } finally {
      await browser.close();
    }
  });
});
