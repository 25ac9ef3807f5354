import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { startShopHttp, type ShopHttp } from './support/mcp-shop';

/**
 * Evaluations and forks in the console, in Chromium against a real Keel (issue 30): a replay of a recorded
 * conversation finishes in the Evals view with its case passed, its case shows the recorded and candidate turns side
 * by side, and "Fork from here" on a turn of the transcript makes a fork, opens it under its banner, enables a
 * tool's real effects from there, and goes on talking to the fork (the original untouched).
 */
const CHROMIUM = process.env.KEEL_CHROMIUM ?? '/usr/bin/chromium';

let keel: TestKeel;
let shop: ShopHttp;
let base: string;
let browser: Browser;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install chromium (.ci/run does)`);
  keel = await startTestKeel();
  shop = await startShopHttp();
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
  await shop?.close();
});

/** The console at a place, with the agent chosen in its Agent field, collecting CSP violations and page errors. */
async function consoleFor(agentId: string, view: string): Promise<{ page: Page; problems: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  contexts.push(context);
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text())) problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  await page.goto(`${base}/console/#/${view}`);
  const agent = page.getByLabel('Agent', { exact: true });
  await agent.fill(agentId);
  await agent.press('Enter');
  return { page, problems };
}

interface Evaluation {
  id: string;
  status: string;
  summary: { cases: number; passed: number; failed: number; costUsd: number; modelCalls: number } | null;
  cases: { caseId: string; result: { costUsd: number } | null }[];
}

/** Dollars as the console writes them. */
const usd = (n: number) =>
  new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', maximumFractionDigits: 4 }).format(n);
/** The note a turn leaves when its reply has nowhere to go (a test's message names no channel). */
const NO_CHANNEL = 'reply skipped:channel_none';

/** A conversation's messages, as the API reads them. */
async function messagesOf(agentId: string, conversationId: string): Promise<{ role: string; text: string }[]> {
  const got = await keel.call<{ messages: { role: string; text: string }[] }>(
    'GET',
    `/v1/agents/${agentId}/conversations/${conversationId}?limit=200`,
  );
  expect(got.status, got.raw).toBe(200);
  return got.body.messages;
}

interface Fork {
  conversationId: string;
  forkedFrom: string;
  atTurn: number;
  enabledTools: string[];
}

describe('evaluations and forks in the console', () => {
  it('shows a replay passing, its case side by side, forks at turn 2 and talks to the fork', async () => {
    const agent = uniqueId('evals-ui');
    const conversation = uniqueId('recorded');
    expect((await keel.call('PUT', `/v1/agents/${agent}/tool-servers/shop`, { url: shop.url })).status).toBe(201);
    const messages = ['first question', 'second question', 'third question'];
    for (const text of messages) {
      const res = await keel.post(agent, conversation, { text }, { wait: 30 });
      expect(res.body.status, JSON.stringify(res.body)).toBe('replied');
      expect(res.body.reply?.text).toBe(`echo: ${text}`);
    }
    const started = await keel.call<Evaluation>('POST', `/v1/agents/${agent}/evals`, {
      mode: 'replay',
      recorded: { conversationIds: [conversation] },
    });
    expect(started.status, started.raw).toBe(202);
    const evalId = started.body.id;
    const caseId = `conversation:${conversation}`;

    // The Evals view lists it, followed until it finishes with its one case passed, with no model call (a replay):
    // its cost is the recording's.
    const { page, problems } = await consoleFor(agent, 'evals');
    await page.getByRole('heading', { name: 'Evaluations', exact: true }).waitFor();
    expect(await page.getByRole('link', { name: 'Evaluations', exact: true }).getAttribute('aria-current')).toBe(
      'page',
    );
    const evalRow = page
      .getByRole('region', { name: 'Evaluations table' })
      .getByRole('row')
      .filter({ hasText: evalId.slice(0, 8) });
    const evalCells = evalRow.getByRole('cell');
    await expect.poll(() => evalCells.nth(1).textContent(), { timeout: 60_000 }).toBe('finished');
    const done = (await keel.call<Evaluation>('GET', `/v1/agents/${agent}/evals/${evalId}`)).body;
    expect(done.summary).toMatchObject({ cases: 1, passed: 1, failed: 0, modelCalls: 0 });
    expect(await evalCells.allTextContents()).toEqual([
      evalId.slice(0, 8),
      'finished',
      'replay',
      '—',
      '1',
      '0',
      usd(done.summary!.costUsd),
      expect.stringMatching(/ago$/),
    ]);

    // The form checks the candidate as JSON before sending, and shows the API's refusal as the API said it.
    const alert = page.getByRole('alert');
    await page.getByLabel('Candidate (JSON)').fill('{"model": ');
    await page.getByRole('button', { name: 'Start evaluation' }).click();
    await expect.poll(() => alert.textContent()).toMatch(/^The candidate is not valid JSON: /);
    await page.getByLabel('Candidate (JSON)').fill('{}');
    await page.getByRole('button', { name: 'Start evaluation' }).click();
    const refused = await keel.call<{ error: { message: string } }>('POST', `/v1/agents/${agent}/evals`, {
      mode: 'replay',
      candidate: {},
    });
    expect(refused.status).toBe(400);
    expect(refused.body.error.message).toContain('an evaluation needs recorded conversations, written cases, or both');
    await expect.poll(() => alert.textContent()).toBe(refused.body.error.message);

    // The evaluation's suite: its one case passed, nothing changed, no divergence.
    await evalRow.getByRole('link', { name: evalId.slice(0, 8) }).click();
    await page.getByRole('heading', { name: `Evaluation ${evalId.slice(0, 8)}` }).waitFor();
    expect(page.url()).toBe(`${base}/console/#/agents/${agent}/evals/${evalId}`);
    const caseRow = page.getByRole('region', { name: 'Cases table' }).getByRole('row').filter({ hasText: caseId });
    await caseRow.waitFor();
    expect(await caseRow.getByRole('cell').allTextContents()).toEqual([
      'recorded',
      'passed',
      '—',
      usd(done.cases[0]!.result!.costUsd),
      expect.stringMatching(/^\d+(\.\d)? m?s$/),
      '0',
      'none',
      'none',
      'none',
    ]);

    // The case, side by side: each turn's recorded reply on the left, the candidate's on the right.
    await caseRow.getByRole('link', { name: caseId }).click();
    await page.getByRole('heading', { name: `Case ${caseId}` }).waitFor();
    for (const [i, text] of messages.entries()) {
      for (const side of ['Recorded', 'Candidate']) {
        const region = page.getByRole('region', { name: `${side}, turn ${i + 1}` });
        await region.waitFor();
        expect(await region.getByRole('definition').allTextContents()).toEqual(['replied', `echo: ${text}`]);
        expect(await region.textContent()).toContain(text);
      }
    }
    expect(await page.locator('.turn.changed').count()).toBe(0);

    // The conversation: a "Fork from here" on each of its three turns; turn 2's makes a fork and opens it. It is no
    // fork (its fork read answers 404): no composer, an operator never writes into a person's conversation.
    const forkRead = page.waitForResponse((r) => r.url().endsWith(`/conversations/${conversation}/fork`));
    // An old address (no agent in it), opened in this tab, is said again with the tab's agent.
    await page.goto(`${base}/console/#/conversations/${conversation}`);
    await page.getByRole('heading', { name: `Conversation ${conversation}` }).waitFor();
    await expect.poll(() => page.url()).toBe(`${base}/console/#/agents/${agent}/conversations/${conversation}`);
    expect((await forkRead).status()).toBe(404);
    const forkButtons = page.getByRole('button', { name: /^Fork from here/ });
    await expect.poll(() => forkButtons.count(), { timeout: 15_000 }).toBe(3);
    expect(await page.getByLabel('Message', { exact: true }).count()).toBe(0);
    const originalMessages = await messagesOf(agent, conversation);
    expect(originalMessages.map((m) => m.text)).toEqual(
      messages.flatMap((text) => [text, `echo: ${text}`, NO_CHANNEL]),
    );
    await page.getByRole('button', { name: 'Fork from here, at turn 2' }).click();
    const forks = `${base}/console/#/agents/${agent}/conversations/`;
    await page.waitForURL((url) => url.href.startsWith(`${forks}fork-`));
    const forkId = decodeURIComponent(page.url().slice(forks.length));
    await page.getByRole('heading', { name: `Conversation ${forkId}` }).waitFor();
    const banner = page.locator('.fork-banner');
    await expect
      .poll(() => banner.textContent(), { timeout: 15_000 })
      .toContain(`Fork of ${conversation} at turn 2: tool calls are dry runs.`);

    const fork = await keel.call<Fork>('GET', `/v1/agents/${agent}/conversations/${forkId}/fork`);
    expect(fork.status, fork.raw).toBe(200);
    expect(fork.body).toEqual({
      conversationId: forkId,
      forkedFrom: conversation,
      atTurn: 2,
      candidate: {},
      enabledTools: [],
    });
    // The original is not a fork: no banner there (its GET …/fork answers 404).
    expect((await keel.call('GET', `/v1/agents/${agent}/conversations/${conversation}/fork`)).status).toBe(404);

    // A tool's real effects, switched on from the banner, are saved on the fork.
    const lookup = banner.getByRole('switch', { name: 'shop__lookup_order' });
    expect(await lookup.isChecked()).toBe(false);
    await lookup.press('Space');
    await expect
      .poll(
        async () =>
          (await keel.call<Fork>('GET', `/v1/agents/${agent}/conversations/${forkId}/fork`)).body.enabledTools,
        { timeout: 15_000 },
      )
      .toEqual(['shop__lookup_order']);
    await expect.poll(() => lookup.isChecked()).toBe(true);
    expect(await banner.textContent()).toContain(
      'tool calls are dry runs, except those of the tools with real effects below.',
    );

    // Talking to the fork: the message's turn, 3, joins its transcript with the scripted model's reply (delivered
    // nowhere: a fork has no channel); the box empties; the original conversation gets nothing.
    const box = page.getByLabel('Message', { exact: true });
    await box.fill('hello fork');
    await page.getByRole('button', { name: 'Send', exact: true }).click();
    const lastTurn = page.getByRole('region', { name: 'Transcript' }).locator('.turn').last();
    await expect
      .poll(() => lastTurn.locator('.text').allTextContents(), { timeout: 30_000 })
      .toEqual(['hello fork', 'echo: hello fork', NO_CHANNEL]);
    expect(await lastTurn.locator('.turn-head').textContent()).toMatch(/^Turn 3 /);
    await expect.poll(() => box.inputValue()).toBe('');
    expect((await messagesOf(agent, forkId)).map((m) => m.text)).toEqual([
      ...originalMessages.slice(0, 6).map((m) => m.text),
      'hello fork',
      'echo: hello fork',
      NO_CHANNEL,
    ]);
    expect(await messagesOf(agent, conversation)).toEqual(originalMessages);
    expect(originalMessages).toHaveLength(9);

    expect(await page.getByRole('alert').count()).toBe(0);
    // The switches and the forms ran under the page's policy: no inline style, no error.
    expect(problems).toEqual([]);
  });
});
