import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { endedEval, type Evaluation } from './support/evals';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { startShopHttp, type ShopHttp } from './support/mcp-shop';

/**
 * The console's links carry their agent (issue 50): an address copied from a tab, opened in a fresh browser context
 * (an empty sessionStorage: no agent, no token), shows the same page, also behind KEEL_API_TOKENS once signed in. The
 * old addresses, which name no agent, still open; the Agent field follows the address and the address the field. An
 * evaluation's cases table fits a 1,400-pixel window.
 */
const CHROMIUM = process.env.KEEL_CHROMIUM ?? '/usr/bin/chromium';
const TOKEN = 'console-links-operator-token';
/** A token of one agent's: refused the inbox of every agent (403), shown its agent's approvals. */
const AGENT_TOKEN = 'console-links-agent-token';
const ONE_AGENT = uniqueId('links-one');
/** A candidate's system prompt long enough that the first divergence's diff is long: words, and a long URL. */
const LONG_PROMPT =
  'Answer in French, politely and briefly, and always name the order you are talking about. '.repeat(6) +
  `See https://example.com/${'policies/'.repeat(24)}returns.html before answering.`;

let keel: TestKeel;
let guarded: TestKeel;
let shop: ShopHttp;
let browser: Browser;
const bases = new Map<TestKeel, string>();
const contexts: BrowserContext[] = [];

async function listen(k: TestKeel): Promise<void> {
  await k.api.listen({ port: 0, host: '127.0.0.1' });
  bases.set(k, `http://127.0.0.1:${(k.api.server.address() as AddressInfo).port}/console/`);
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install chromium (.ci/run does)`);
  keel = await startTestKeel();
  // The second Keel asks for a token. Both share the run's PostgreSQL and Temporal: what the first made, the second
  // shows (as two APIs of one deployment do).
  guarded = await startTestKeel({
    tokens: new Map([
      [TOKEN, '*'],
      [AGENT_TOKEN, ONE_AGENT],
    ]),
  });
  shop = await startShopHttp();
  await Promise.all([listen(keel), listen(guarded)]);
  // As root Chromium needs --no-sandbox; CI runs as root.
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
});
afterEach(async () => {
  for (const c of contexts.splice(0)) await c.close();
});
afterAll(async () => {
  await browser?.close();
  await Promise.all([keel?.stop(), guarded?.stop(), shop?.close()]);
});

/** A fresh browser context (nothing in its sessionStorage) at this address, collecting page errors. */
async function open(url: string, width = 1280): Promise<{ page: Page; problems: string[] }> {
  const context = await browser.newContext({ viewport: { width, height: 900 } });
  contexts.push(context);
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  await page.goto(url);
  return { page, problems };
}

async function signIn(page: Page, token = TOKEN): Promise<void> {
  await page.getByLabel('API token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

const agentField = (page: Page) => page.getByLabel('Agent', { exact: true });

async function chooseAgent(page: Page, agentId: string): Promise<void> {
  await agentField(page).fill(agentId);
  await agentField(page).press('Enter');
}

/** What an agent holds for these tests: a conversation, a job, and a replay of the conversation that diverges. */
async function seed(agentId: string, conversations = 1) {
  const ids = Array.from({ length: conversations }, () => uniqueId('talk'));
  for (const c of ids) {
    const sent = await keel.post(agentId, c, { text: `hello from ${c}` }, { wait: 30 });
    expect(sent.body.status, JSON.stringify(sent.body)).toBe('replied');
  }
  const job = await keel.call('POST', `/v1/agents/${agentId}/jobs`, {
    name: 'Links digest',
    schedule: { kind: 'every', intervalMs: 3_600_000 },
    task: 'digest the links',
  });
  expect(job.status, job.raw).toBe(201);
  const started = await keel.call<Evaluation>('POST', `/v1/agents/${agentId}/evals`, {
    mode: 'replay',
    recorded: { conversationIds: ids },
    candidate: { systemPrompt: LONG_PROMPT },
  });
  expect(started.status, started.raw).toBe(202);
  const done = await endedEval(keel, agentId, started.body.id);
  expect(done.cases.map((c) => c.result?.firstDivergence?.part)).toEqual(ids.map(() => 'system'));
  return { conversation: ids[0]!, evalId: done.id, caseId: `conversation:${ids[0]!}` };
}

/** A place of the console as a person sees it: its heading, and the text of what it shows. */
async function seen(page: Page, heading: string, content: string): Promise<string[]> {
  await page.getByRole('heading', { name: heading, exact: true }).waitFor({ timeout: 15_000 });
  const shown = page.locator(content);
  await shown.first().waitFor({ timeout: 15_000 });
  return shown.allTextContents();
}

const consoles = [
  { name: 'without tokens', keel: () => keel },
  { name: 'with KEEL_API_TOKENS, after signing in', keel: () => guarded },
];

describe('a copied link opens the same page in a fresh browser context', () => {
  for (const variant of consoles) {
    it(`a conversation, an evaluation, its case and the jobs: ${variant.name}`, async () => {
      const k = variant.keel();
      const base = bases.get(k)!;
      const agent = uniqueId('links');
      const s = await seed(agent);
      const signsIn = k === guarded;

      // The original tab: signed in if asked, the agent chosen in Agent, each place reached by its links.
      const { page, problems } = await open(base);
      if (signsIn) await signIn(page);
      await chooseAgent(page, agent);
      const places: { url: string; heading: string; content: string; shown: string[] }[] = [];
      const visit = async (heading: string, content: string) =>
        places.push({ url: page.url(), heading, content, shown: await seen(page, heading, content) });

      await page.getByRole('link', { name: 'Conversations', exact: true }).click();
      await page.getByRole('link', { name: s.conversation, exact: true }).click();
      await visit(`Conversation ${s.conversation}`, '.transcript .text');
      await page.getByRole('link', { name: 'Evaluations', exact: true }).click();
      await page.getByRole('link', { name: s.evalId.slice(0, 8), exact: true }).click();
      await visit(`Evaluation ${s.evalId.slice(0, 8)}`, '.table-wrap tbody tr');
      await page.getByRole('link', { name: s.caseId, exact: true }).click();
      await visit(`Case ${s.caseId}`, '.side');
      await page.getByRole('link', { name: 'Jobs and routines', exact: true }).click();
      await visit('Jobs and routines', 'article h4, article dd');

      expect(places[0]!.shown).toContain(`hello from ${s.conversation}`);
      expect(places[3]!.shown).toEqual(['Links digest', 'every 1 hour', 'active', 'digest the links']);

      // A teammate opens each copied address in a browser of their own: the same page, the agent in Agent.
      for (const p of places) {
        const copied = await open(p.url);
        if (signsIn) await signIn(copied.page);
        expect(await seen(copied.page, p.heading, p.content)).toEqual(p.shown);
        expect(await agentField(copied.page).inputValue()).toBe(agent);
        expect(copied.page.url()).toBe(p.url);
        expect(copied.problems).toEqual([]);
      }

      // Each address names the agent (and never the token), each id encoded on its own.
      const at = (path: string) => `${base}#/agents/${agent}/${path}`;
      expect(places.map((p) => p.url)).toEqual([
        at(`conversations/${s.conversation}`),
        at(`evals/${s.evalId}`),
        at(`evals/${s.evalId}/cases/${encodeURIComponent(s.caseId)}`),
        at('jobs'),
      ]);
      expect(places.every((p) => !p.url.includes(TOKEN))).toBe(true);
      expect(problems).toEqual([]);
    });
  }
});

describe('addresses and the Agent field', () => {
  it('opens an old address: asks for the agent without one, redirects to the new form with one', async () => {
    const agent = uniqueId('links-old');
    const s = await seed(agent);
    const base = bases.get(keel)!;

    // No agent in the tab: the page asks for one, as it did; choosing it opens the conversation, the address now
    // naming the agent.
    const { page } = await open(`${base}#/conversations/${s.conversation}`);
    await page.getByRole('heading', { name: 'Conversations', exact: true }).waitFor();
    expect(await page.locator('.notice').textContent()).toBe(
      'Choose an agent in Agent above, or from the list of agents, to see its conversations.',
    );
    await chooseAgent(page, agent);
    await page.getByRole('heading', { name: `Conversation ${s.conversation}` }).waitFor();
    expect(page.url()).toBe(`${base}#/agents/${agent}/conversations/${s.conversation}`);

    // An agent in the tab: an old address is replaced by the new one, in place (Back does not return to it).
    await page.goto(`${base}#/evals/${s.evalId}`);
    await page.getByRole('heading', { name: `Evaluation ${s.evalId.slice(0, 8)}` }).waitFor();
    await expect.poll(() => page.url()).toBe(`${base}#/agents/${agent}/evals/${s.evalId}`);
    await page.goto(`${base}#/jobs`);
    await expect.poll(() => page.url()).toBe(`${base}#/agents/${agent}/jobs`);
    await page.goBack();
    await expect.poll(() => page.url()).toBe(`${base}#/agents/${agent}/evals/${s.evalId}`);
    await page.getByRole('heading', { name: `Evaluation ${s.evalId.slice(0, 8)}` }).waitFor();
  });

  it('follows the address in the Agent field, and the field in the address', async () => {
    const [ada, bob] = [uniqueId('links-ada'), uniqueId('links-bob')];
    for (const a of [ada, bob]) {
      const job = await keel.call('POST', `/v1/agents/${a}/jobs`, {
        name: `Digest of ${a}`,
        schedule: { kind: 'every', intervalMs: 3_600_000 },
        task: 'digest',
      });
      expect(job.status, job.raw).toBe(201);
    }
    const base = bases.get(keel)!;
    const jobOf = (page: Page) => page.locator('article h4');

    // A link to Bob's jobs, opened in a tab that looks at Ada: Agent follows it, and the tab remembers Bob.
    const { page } = await open(`${base}#/agents/${ada}/jobs`);
    await expect.poll(() => jobOf(page).allTextContents(), { timeout: 15_000 }).toEqual([`Digest of ${ada}`]);
    expect(await agentField(page).inputValue()).toBe(ada);
    await page.goto(`${base}#/agents/${bob}/jobs`);
    await expect.poll(() => jobOf(page).allTextContents(), { timeout: 15_000 }).toEqual([`Digest of ${bob}`]);
    await expect.poll(() => agentField(page).inputValue()).toBe(bob);
    expect(await page.evaluate<string | null>("sessionStorage.getItem('keel.agent')")).toBe(bob);

    // Choosing Ada in Agent changes the address; Back goes to Bob's jobs again, and Agent with it.
    await chooseAgent(page, ada);
    await expect.poll(() => page.url()).toBe(`${base}#/agents/${ada}/jobs`);
    await expect.poll(() => jobOf(page).allTextContents(), { timeout: 15_000 }).toEqual([`Digest of ${ada}`]);
    await page.goBack();
    await expect.poll(() => page.url()).toBe(`${base}#/agents/${bob}/jobs`);
    await expect.poll(() => agentField(page).inputValue()).toBe(bob);

    // The places of every agent keep their addresses: the list of agents, and the inbox of every agent's approvals.
    await page.getByRole('link', { name: 'Agents', exact: true }).click();
    await expect.poll(() => page.url()).toBe(`${base}#/agents`);
    await page.getByRole('link', { name: 'Approvals', exact: true }).click();
    await expect.poll(() => page.url()).toBe(`${base}#/approvals`);
    expect(await agentField(page).inputValue()).toBe(bob);
  });

  it("gives a token of one agent its agent's approvals, at the agent's address", async () => {
    const put = await keel.call('PUT', `/v1/agents/${ONE_AGENT}/tool-servers/shop`, { url: shop.url });
    expect(put.status, put.raw).toBe(201);
    // A refund waits for a person (the shop's refund tool is `approve` by default).
    const sent = await keel.post(ONE_AGENT, uniqueId('refund'), {
      text: '/tool shop__refund {"orderId":"L1","amount":3}',
    });
    expect(sent.status).toBe(202);
    await eventually(
      async () =>
        (await keel.call<{ items: unknown[] }>('GET', `/v1/agents/${ONE_AGENT}/approvals`)).body.items.length === 1 ||
        undefined,
      60_000,
      'the tool call waiting',
    );
    const base = bases.get(guarded)!;
    const item = (page: Page) => page.getByRole('article').filter({ hasText: 'Tool call shop__refund' });

    // The inbox asks for the token's agent; once given, the address is its agent's approvals.
    const { page } = await open(`${base}#/approvals`);
    await signIn(page, AGENT_TOKEN);
    await page.getByText('This token sees one agent only').waitFor({ timeout: 15_000 });
    await chooseAgent(page, ONE_AGENT);
    await expect.poll(() => page.url()).toBe(`${base}#/agents/${ONE_AGENT}/approvals`);
    await item(page).waitFor({ timeout: 15_000 });

    // That address, copied to a fresh browser, shows the same item once signed in.
    const copied = await open(page.url());
    await signIn(copied.page, AGENT_TOKEN);
    await item(copied.page).waitFor({ timeout: 15_000 });
    expect(await item(copied.page).textContent()).toBe(await item(page).textContent());
    expect(await agentField(copied.page).inputValue()).toBe(ONE_AGENT);
    expect(copied.page.url()).toBe(`${base}#/agents/${ONE_AGENT}/approvals`);
  });
});

describe("an evaluation's tables at 1,400 pixels", () => {
  it('shows the first divergence of long diffs without the page scrolling sideways', async () => {
    const agent = uniqueId('links-wide');
    const s = await seed(agent, 3);
    const { page } = await open(`${bases.get(keel)!}#/evals/${s.evalId}`, 1400);
    await chooseAgent(page, agent);
    const table = page.getByRole('region', { name: 'Cases table' });
    await expect.poll(() => table.locator('tbody tr').count(), { timeout: 15_000 }).toBe(3);
    expect(await table.locator('tbody tr').first().textContent()).toContain('Turn 1, model call 1: the system prompt');

    expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(1400);
    // The column shows whole inside the table's own box, which is inside the window: nothing to scroll to see it.
    const column = table.getByRole('columnheader', { name: 'First divergence' });
    const [cell, wrap] = [await column.boundingBox(), await table.boundingBox()];
    expect(cell!.x + cell!.width).toBeLessThanOrEqual(wrap!.x + wrap!.width);
    expect(wrap!.x + wrap!.width).toBeLessThanOrEqual(1400);

    // Narrower, the table scrolls in its own box, and keeps each row's case in view as it does.
    await page.setViewportSize({ width: 1000, height: 900 });
    await expect.poll(() => page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(1000);
    // Wider than its box, and scrolled to its far right (as the keyboard or a swipe would).
    const wrapper = `document.querySelector('[aria-label="Cases table"]')`;
    expect(await page.evaluate<number>(`${wrapper}.scrollWidth - ${wrapper}.clientWidth`)).toBeGreaterThan(0);
    await page.evaluate(`${wrapper}.scrollTo({ left: ${wrapper}.scrollWidth })`);
    await expect.poll(() => page.evaluate<number>(`${wrapper}.scrollLeft`)).toBeGreaterThan(0);
    const caseCell = table.getByRole('rowheader', { name: s.caseId });
    const [scrolled, first, box] = [
      await column.boundingBox(),
      await caseCell.boundingBox(),
      await table.boundingBox(),
    ];
    expect(scrolled!.x + scrolled!.width).toBeLessThanOrEqual(box!.x + box!.width + 1);
    expect(first!.x).toBeCloseTo(box!.x, 0);
  });
});
