import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { conversationWorkflowId } from '../domain/ids';
import { startTestKeel, uniqueId, type TestKeel } from './support/keel';

/**
 * Agents in the console, in Chromium against a real Keel (issue 29): the console opens on the list of agents, the
 * Agent combobox picks one, a conversation is deleted after a confirmation (its workflow ends, its transcript is
 * gone), and the audit view shows who deleted it.
 */
const CHROMIUM = process.env.KEEL_CHROMIUM ?? '/usr/bin/chromium';

let keel: TestKeel;
let base: string;
let browser: Browser;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install chromium (.ci/run does)`);
  keel = await startTestKeel();
  await keel.api.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(keel.api.server.address() as AddressInfo).port}`;
  // As root Chromium needs --no-sandbox; CI runs as root.
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
});
afterEach(async () => {
  for (const c of contexts.splice(0)) await c.close();
});
afterAll(async () => {
  await browser?.close();
  await keel?.stop();
});

/**
 * The console, opened without a place or an agent (a person's first visit), collecting Content-Security-Policy
 * violations and page errors.
 */
async function openConsole(): Promise<{ page: Page; problems: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  contexts.push(context);
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text())) problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  await page.goto(`${base}/console/`);
  return { page, problems };
}

describe('agents in the console', () => {
  it('lists the agents, picks one, deletes a conversation after a confirmation, and audits who did', async () => {
    const prefix = uniqueId('agents');
    const [ada, bob] = [`${prefix}-ada`, `${prefix}-bob`];
    expect((await keel.call('PUT', `/v1/agents/${ada}`, { name: 'Ada the researcher' })).status).toBeLessThan(300);
    expect((await keel.call('PUT', `/v1/agents/${bob}`, { name: 'Bob the builder' })).status).toBeLessThan(300);
    const [kept, doomed] = [uniqueId('kept'), uniqueId('doomed')];
    for (const c of [kept, doomed]) await keel.post(ada, c, { text: `hello from ${c}` }, { wait: 30 });

    // The console opens on the agents; a search finds this test's two, each with its name and counts.
    const { page, problems } = await openConsole();
    await page.getByRole('heading', { name: 'Agents', exact: true }).waitFor();
    await page.getByLabel('Search agents').fill(prefix);
    const table = page.getByRole('region', { name: 'Agents table' });
    const row = (agentId: string) => table.getByRole('row').filter({ hasText: agentId });
    await expect.poll(() => table.getByRole('row').count(), { timeout: 15_000 }).toBe(3);
    expect(await row(ada).textContent()).toContain('Ada the researcher');
    expect(await row(bob).textContent()).toContain('Bob the builder');
    expect(await row(ada).getByRole('cell').nth(3).textContent()).toBe('2');

    // The Agent combobox offers the agents whose id or name has what is typed; choosing one takes it.
    const field = page.getByLabel('Agent', { exact: true });
    await field.fill(`${prefix}-b`);
    const option = page.getByRole('option', { name: bob });
    await option.click();
    await expect.poll(() => field.inputValue()).toBe(bob);
    await expect.poll(() => row(bob).getByRole('link').getAttribute('aria-current')).toBe('true');

    // Each agent of the list links to its conversations, and choosing it there makes it the agent.
    await row(ada).getByRole('link', { name: ada }).click();
    await page.getByRole('heading', { name: 'Conversations', exact: true }).waitFor();
    expect(page.url()).toBe(`${base}/console/#/agents/${ada}/conversations`);
    await expect.poll(() => field.inputValue()).toBe(ada);
    const link = (c: string) => page.getByRole('link', { name: c });
    await link(kept).waitFor({ timeout: 15_000 });
    await link(doomed).waitFor();

    // Cancelling deletes nothing; confirming deletes, and the conversation leaves the list.
    const deleteButton = page.getByRole('button', { name: `Delete conversation ${doomed}` });
    const dialog = page.getByRole('dialog', { name: `Delete conversation ${doomed}?` });
    await deleteButton.click();
    await dialog.waitFor();
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    await dialog.waitFor({ state: 'detached' });
    expect((await keel.call('GET', `/v1/agents/${ada}/conversations/${doomed}`)).status).toBe(200);
    await deleteButton.click();
    await dialog.getByRole('button', { name: 'Confirm deletion' }).click();
    await link(doomed).waitFor({ state: 'detached', timeout: 30_000 });
    expect(await link(kept).isVisible()).toBe(true);
    expect(await page.getByRole('alert').count()).toBe(0);

    expect((await keel.call('GET', `/v1/agents/${ada}/conversations/${doomed}`)).status).toBe(404);
    expect((await keel.call('GET', `/v1/agents/${ada}/conversations/${kept}`)).status).toBe(200);
    const workflow = await keel.client.workflow.getHandle(conversationWorkflowId(ada, doomed)).describe();
    expect(workflow.status.name).not.toBe('RUNNING');

    // The audit view says what was deleted, by whom (no tokens here: `dev`), and what the deletion did.
    await page.getByRole('link', { name: 'Audit', exact: true }).click();
    await page.getByRole('heading', { name: 'Audit', exact: true }).waitFor();
    const entries = page
      .getByRole('region', { name: 'Audit trail table' })
      .getByRole('row')
      .filter({ hasText: 'conversation.delete' })
      .filter({ hasText: doomed });
    await expect.poll(() => entries.count(), { timeout: 15_000 }).toBe(2);
    const finished = entries.filter({ hasText: 'finished' });
    expect(await finished.getByRole('cell').nth(3).textContent()).toBe('dev');
    expect(await finished.getByRole('cell').nth(4).textContent()).toContain('1 conversation');
    expect(await entries.filter({ hasText: 'requested' }).count()).toBe(1);
    // The combobox's list and the dialog ran under the page's policy: no inline style, no error.
    expect(problems).toEqual([]);
  });
});
