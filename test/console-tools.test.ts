import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { stopProcess } from '../scripts/processes';
import { eventually, startTestKeel, uniqueId, type ApiMethod, type TestKeel } from './support/keel';
import { startShopHttp, type ShopHttp } from './support/mcp-shop';
import { startWorkerProcess } from './support/workers';

/**
 * Tool calls in the console, in Chromium (issue 26): a destructive tool waits in the inbox with its arguments and runs
 * exactly once after two clicks, though the worker was killed with -9 during the wait; the transcript shows the call
 * with its name, arguments, result, policy and decision; the Tools page changes a policy.
 */
const CHROMIUM = process.env.KEEL_CHROMIUM ?? '/usr/bin/chromium';
let keel: TestKeel;
let shop: ShopHttp;
let browser: Browser;
let base: string;
const workers: ChildProcess[] = [];

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install chromium (.ci/run does)`);
  keel = await startTestKeel({ worker: false });
  shop = await startShopHttp();
  await keel.api.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(keel.api.server.address() as AddressInfo).port}`;
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
});
afterAll(async () => {
  await browser?.close();
  await Promise.all(workers.map((w) => stopProcess(w)));
  await keel?.stop();
  await shop?.close();
});

function worker(): ChildProcess {
  const w = startWorkerProcess(keel, inject('databaseUrl'));
  workers.push(w);
  return w;
}

async function consoleFor(agentId: string, view: string): Promise<Page> {
  const page = await (await browser.newContext({ viewport: { width: 1280, height: 900 } })).newPage();
  await page.goto(`${base}/console/#/${view}`);
  const agent = page.getByLabel('Agent');
  await agent.fill(agentId);
  await agent.press('Enter');
  return page;
}

const api = <T>(method: ApiMethod, url: string, body?: unknown) => keel.call<T>(method, url, body);

describe('a tool call in the console', () => {
  it('waits in the inbox, survives a kill -9, runs once after two clicks, and the transcript shows it', async () => {
    const a = uniqueId('a');
    expect((await api('PUT', `/v1/agents/${a}/tool-servers/shop`, { url: shop.url })).status).toBe(201);
    const first = worker();
    const conv = uniqueId('c');
    const posted = await keel.post(a, conv, { text: '/tool shop__refund {"orderId":"W1","amount":12}' });
    await eventually(
      async () => (await api<{ items: unknown[] }>('GET', `/v1/agents/${a}/approvals`)).body.items.length === 1,
      60_000,
      'the approval',
    );
    first.kill('SIGKILL');
    await new Promise((resolve) => first.once('exit', resolve));
    worker();

    const page = await consoleFor(a, 'approvals');
    const item = page.getByRole('article').filter({ hasText: 'Tool call shop__refund' }).filter({ hasText: a });
    await expect.poll(() => item.isVisible(), { timeout: 15_000 }).toBe(true);
    const shown = (await item.textContent()) ?? '';
    expect(shown).toContain('"orderId": "W1"');
    expect(shown).toContain('"amount": 12');
    expect(shown).toMatch(/expires in 1 day|expires in 24 hours/);
    await item.getByRole('button', { name: 'Approve' }).click();
    await page.getByRole('button', { name: 'Confirm approval' }).dblclick();

    const replied = await eventually(
      async () => {
        const { rows } = await keel.pool.query<{ status: string }>(`SELECT status FROM turns WHERE turn_id = $1`, [
          posted.body.turnId,
        ]);
        return rows[0]?.status === 'replied';
      },
      90_000,
      'the reply',
    );
    expect(replied).toBe(true);
    expect(shop.calls.filter((c) => c.args.orderId === 'W1')).toHaveLength(1);
    await expect.poll(() => item.count(), { timeout: 15_000 }).toBe(0);

    // The transcript names the tool and shows what it was asked, what it answered, its policy and the decision.
    await page.goto(`${base}/console/#/conversations/${conv}`);
    const transcript = page.getByRole('region', { name: 'Transcript' });
    await expect.poll(() => transcript.textContent(), { timeout: 15_000 }).toContain('Tool call: shop__refund');
    const call = transcript.locator('details.tool').filter({ hasText: 'shop__refund' });
    await call.locator('summary').click();
    const text = (await call.textContent()) ?? '';
    expect(text).toContain('policy approve · ok by dev');
    expect(text).toContain('"orderId": "W1"');
    expect(text).toContain('refunded 12 on order W1');
    expect(text).not.toContain('(name not recorded)');
  });

  it("the Tools page lists the agent's servers and tools, and changes a tool's policy", async () => {
    const a = uniqueId('a');
    expect((await api('PUT', `/v1/agents/${a}/tool-servers/shop`, { url: shop.url })).status).toBe(201);
    const page = await consoleFor(a, 'tools');
    const select = page.getByLabel('Policy of shop__lookup_order');
    await expect.poll(() => select.inputValue(), { timeout: 15_000 }).toBe('auto');
    expect(await page.getByLabel('Policy of shop__refund').inputValue()).toBe('approve');
    await select.selectOption('approve');
    await expect
      .poll(
        async () =>
          (
            await api<{ tools: { name: string; policy: string }[] }>('GET', `/v1/agents/${a}/tool-servers/shop`)
          ).body.tools.find((t) => t.name === 'lookup_order')?.policy,
        { timeout: 15_000 },
      )
      .toBe('approve');
  });
});
