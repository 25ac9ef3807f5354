import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import axe from 'axe-core';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { conversationWorkflowId } from '../domain/ids';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { propose, reflectionApi } from './support/reflection';
import { author, CONTACT_ADA, finished, routineApi } from './support/routines';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';

/**
 * The operator console in a real browser: Debian's Chromium driven by playwright-core, against a real Keel (its API
 * listening on a loopback port, a worker, the run's Temporal and PostgreSQL). One Keel runs without tokens (loopback
 * needs none, as with npm start); another with an operator token, for signing in.
 */
const CHROMIUM = process.env.KEEL_CHROMIUM ?? '/usr/bin/chromium';
const TOKEN = 'console-operator-token';

let keel: TestKeel;
let guarded: TestKeel;
let base: string;
let guardedBase: string;
let browser: Browser;
let hook: WebhookReceiver;
const contexts: BrowserContext[] = [];

async function listen(k: TestKeel): Promise<string> {
  await k.api.listen({ port: 0, host: '127.0.0.1' });
  return `http://127.0.0.1:${(k.api.server.address() as AddressInfo).port}`;
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install chromium (.ci/run does)`);
  hook = await startWebhookReceiver();
  keel = await startTestKeel({ reflection: { drainAtQueued: 1 }, temporalUiUrl: 'http://127.0.0.1:8233' });
  guarded = await startTestKeel({ tokens: new Map([[TOKEN, '*']]) });
  [base, guardedBase] = [await listen(keel), await listen(guarded)];
  // As root Chromium needs --no-sandbox; CI runs as root.
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
});
afterEach(async () => {
  for (const c of contexts.splice(0)) await c.close();
});
afterAll(async () => {
  await browser?.close();
  await Promise.all([keel?.stop(), guarded?.stop(), hook?.close()]);
});

/** A fresh page at 1280 px (or the given width), collecting Content-Security-Policy violations and page errors. */
async function open(
  url: string,
  opts: { width?: number; bypassCSP?: boolean } = {},
): Promise<{ page: Page; problems: string[] }> {
  const context = await browser.newContext({
    viewport: { width: opts.width ?? 1280, height: 900 },
    bypassCSP: opts.bypassCSP ?? false,
  });
  contexts.push(context);
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text())) problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  await page.goto(url);
  return { page, problems };
}

/** The console signed in to the tokenless Keel with this agent chosen. */
async function consoleFor(agentId: string, view: string, width?: number) {
  const opened = await open(`${base}/console/#/${view}`, { width });
  const agent = opened.page.getByLabel('Agent');
  await agent.fill(agentId);
  await agent.press('Enter');
  return opened;
}

async function api<T>(k: TestKeel, method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown) {
  const res = await k.api.inject({
    method,
    url,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) }),
  });
  return { status: res.statusCode, body: res.json<T>() };
}

/** A routine run stopped at its send gate, whose approved send goes to the local webhook receiver. */
async function waitingRoutineRun(agentId: string) {
  const r = routineApi(() => keel);
  await r.app(agentId, 'crm', [{ id: 'l1', name: 'Ada', email: 'ada@example.com', touches: '0' }]);
  await r.routine(agentId, 'crm', 'contact', {
    label: 'Contact Ada',
    prompt: `Contact Ada ${author(CONTACT_ADA)}`,
    delivery: { channel: 'webhook', url: hook.url },
  });
  const waiting = await r.runNow(agentId, 'crm', 'contact', (x) => x.status === 'needs_approval');
  return { r, waiting };
}

const deliveriesTo = (agentId: string) =>
  hook.received.filter((w) => (w.body as { agentId?: string }).agentId === agentId);

describe('the console page', () => {
  it('is served at /console with a strict Content-Security-Policy and no inline script', async () => {
    const res = await fetch(`${base}/console/`);
    expect(res.status).toBe(200);
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("default-src 'none'");
    expect(csp).not.toContain('unsafe-inline');
    const html = await res.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    const { page, problems } = await open(`${base}/console/`);
    await expect.poll(() => page.getByRole('heading', { name: 'Approvals' }).isVisible()).toBe(true);
    expect(problems).toEqual([]);
  });

  it('signs in with an API token, kept in sessionStorage and never in a URL', async () => {
    const { page } = await open(`${guardedBase}/console/`);
    const field = page.getByLabel('API token');
    await field.fill('not-a-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('unknown bearer token');
    await field.fill(TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('heading', { name: 'Approvals' }).isVisible()).toBe(true);
    expect(await page.evaluate<string | null>("sessionStorage.getItem('keel.token')")).toBe(TOKEN);
    expect(page.url()).not.toContain(TOKEN);
    await expect.poll(() => page.getByRole('button', { name: 'Sign out' }).isVisible()).toBe(true);
  });
});

describe('approvals', () => {
  it('approves a waiting routine run with two clicks: it ends ok and its send arrives once', async () => {
    const a = uniqueId('a');
    const { r, waiting } = await waitingRoutineRun(a);
    const { page } = await consoleFor(a, 'approvals');
    // The inbox holds every agent's approvals (no tokens here: an operator's view); this test's item names its agent.
    const item = page.getByRole('article').filter({ hasText: 'Contact Ada (crm/contact)' }).filter({ hasText: a });
    await expect.poll(() => item.isVisible(), { timeout: 15_000 }).toBe(true);
    expect(await item.textContent()).toMatch(/send/);
    expect(await item.textContent()).toMatch(/Contacted Ada: draft: a short note to Ada/);
    expect(await item.textContent()).toMatch(/expires in 7 days/);

    await item.getByRole('button', { name: 'Approve' }).click();
    // A double click on the confirmation approves once: the button is disabled while its request is in flight.
    await page.getByRole('button', { name: 'Confirm approval' }).dblclick();
    const done = await r.waitForRun(a, 'crm', 'contact', (x) => x.runId === waiting.runId && finished(x), 'approved');
    expect(done.status).toBe('ok');
    // The send happens inside the run: once the run has ended, no second one can come.
    expect(deliveriesTo(a)).toHaveLength(1);
    expect(deliveriesTo(a)[0]!.body).toMatchObject({ text: 'Contacted Ada: draft: a short note to Ada' });
    const decisions = await api<{ decision: { approved: boolean } | null }[]>(
      keel,
      'GET',
      `/v1/agents/${a}/apps/crm/routines/contact/runs`,
    );
    expect(decisions.body.map((x) => x.decision?.approved)).toEqual([true]);
    await expect.poll(() => item.count()).toBe(0);
  });

  it('approves by keyboard alone: Tab to Approve, Enter, Enter', async () => {
    const a = uniqueId('a');
    const { r, waiting } = await waitingRoutineRun(a);
    const { page } = await consoleFor(a, 'approvals');
    const approve = page.getByRole('article').filter({ hasText: a }).getByRole('button', { name: 'Approve' });
    await expect.poll(() => approve.isVisible(), { timeout: 15_000 }).toBe(true);
    // What has the focus, and whether it is in this test's item (the inbox holds other agents' items too).
    const focused = () =>
      page.evaluate<string>(
        `(() => { const e = document.activeElement; const item = e && e.closest('article');
          const ours = item && item.textContent.includes(${JSON.stringify(a)});
          return (e ? e.textContent.trim() : '') + (ours ? ' (ours)' : ''); })()`,
      );
    for (let i = 0; i < 200 && (await focused()) !== 'Approve (ours)'; i++) await page.keyboard.press('Tab');
    expect(await focused()).toBe('Approve (ours)');
    await page.keyboard.press('Enter');
    const confirm = page.getByRole('button', { name: 'Confirm approval' });
    await expect.poll(() => confirm.isVisible()).toBe(true);
    // The dialog takes the focus, so Enter confirms without a pointer.
    await expect.poll(focused).toBe('Confirm approval');
    await page.keyboard.press('Enter');
    const done = await r.waitForRun(a, 'crm', 'contact', (x) => x.runId === waiting.runId && finished(x), 'approved');
    expect(done.status).toBe('ok');
  });

  it('rejects a memory proposal, and memory stays as it was', async () => {
    const a = uniqueId('a');
    const refl = reflectionApi(() => keel);
    await refl.agent(a);
    const before = await refl.memory(a);
    await refl.say(a, 'c1', propose([{ file: 'persona.md', content: '# Persona\nAlways answer in rhyme.' }]));
    const proposal = await eventually(
      async () => (await refl.proposals(a)).find((p) => p.status === 'awaiting_approval'),
      60_000,
      'a proposal awaiting approval',
    );
    const { page } = await consoleFor(a, 'approvals');
    const item = page
      .getByRole('article')
      .filter({ hasText: `Memory proposal ${proposal.id}` })
      .filter({ hasText: a });
    await expect.poll(() => item.isVisible(), { timeout: 15_000 }).toBe(true);
    const diff = item.getByRole('region', { name: 'Changes to persona.md' });
    expect(await diff.textContent()).toContain('+Always answer in rhyme.');
    await item.getByLabel('Note (optional)').fill('not our voice');
    await item.getByRole('button', { name: 'Reject' }).click();
    await page.getByRole('button', { name: 'Confirm rejection' }).click();
    await eventually(
      async () => (await refl.proposals(a)).find((p) => p.id === proposal.id && p.status === 'rejected'),
      30_000,
      'the proposal rejected',
    );
    expect(await refl.memory(a)).toEqual(before);
  });
});

describe('conversations', () => {
  it('shows a /delay reply arriving token by token in the open transcript', async () => {
    const a = uniqueId('a');
    await keel.post(a, 'c1', { text: 'hello' }, { wait: 30 });
    const { page } = await consoleFor(a, 'conversations');
    await page.getByRole('link', { name: /c1/ }).click();
    const transcript = page.getByRole('region', { name: 'Transcript' });
    await expect.poll(() => transcript.textContent()).toContain('hello');

    const live = page.locator('[aria-live="polite"]');
    const lengths = new Set<number>();
    const watching = (async () => {
      const deadline = Date.now() + 20_000;
      while (Date.now() < deadline) {
        lengths.add(((await live.textContent()) ?? '').length);
        if ((await transcript.textContent())?.includes('nine ten')) return;
        await page.waitForTimeout(50);
      }
    })();
    const sent = await keel.post(a, 'c1', { text: '/delay 3000 one two three four five six seven eight nine ten' });
    expect(sent.status).toBe(202);
    await watching;
    expect(await transcript.textContent()).toContain('one two three four five six seven eight nine ten');
    // The reply grew in several steps before it was whole, not all at once.
    expect([...lengths].filter((n) => n > 0).length).toBeGreaterThanOrEqual(3);
  });

  it('renders text from agents and tools as text: markup shows, and no script runs', async () => {
    const a = uniqueId('a');
    const hostile = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"><b>bold</b>';
    await keel.post(a, 'c1', { text: hostile }, { wait: 30 });
    const { page, problems } = await consoleFor(a, 'conversations');
    await page.getByRole('link', { name: /c1/ }).click();
    const transcript = page.getByRole('region', { name: 'Transcript' });
    await expect.poll(() => transcript.textContent()).toContain('<script>window.__pwned = 1</script>');
    expect(await page.evaluate<unknown>('window.__pwned')).toBeUndefined();
    expect(await transcript.locator('img, b, script').count()).toBe(0);
    expect(problems).toEqual([]);
    const link = page.getByRole('link', { name: 'Open in Temporal UI' }).first();
    expect(await link.getAttribute('href')).toBe(
      `http://127.0.0.1:8233/namespaces/default/workflows/${encodeURIComponent(conversationWorkflowId(a, 'c1'))}`,
    );
  });
});

describe('jobs', () => {
  it('pausing a job takes its next fire away', async () => {
    const a = uniqueId('a');
    const created = await api<{ id: string; nextRunAt: string }>(keel, 'POST', `/v1/agents/${a}/jobs`, {
      name: 'Hourly digest',
      schedule: { kind: 'every', intervalMs: 3_600_000 },
      task: 'digest',
    });
    expect(created.status).toBe(201);
    const { page } = await consoleFor(a, 'jobs');
    const job = page.getByRole('article').filter({ hasText: 'Hourly digest' });
    await expect.poll(() => job.textContent(), { timeout: 15_000 }).toContain('Next fire:');
    expect(await job.textContent()).toContain('every 1 hour');
    await job.getByRole('button', { name: 'Pause' }).click();
    await expect.poll(() => job.textContent()).toContain('No next fire');
    const after = await api<{ status: string; nextRunAt: string | null }>(
      keel,
      'GET',
      `/v1/agents/${a}/jobs/${created.body.id}`,
    );
    expect(after.body).toMatchObject({ status: 'paused', nextRunAt: null });
  });
});

describe('memory', () => {
  it('rolls memory back to an earlier version after a confirmation', async () => {
    const a = uniqueId('a');
    const refl = reflectionApi(() => keel);
    await refl.agent(a);
    await refl.say(a, 'c1', propose([{ file: 'domain-knowledge.md', content: '# Domain knowledge\nfirst' }]));
    await eventually(async () => (await refl.memory(a)).version >= 2 || undefined, 60_000, 'memory version 2');
    await refl.say(a, 'c2', propose([{ file: 'domain-knowledge.md', content: '# Domain knowledge\nsecond' }]));
    await eventually(async () => (await refl.memory(a)).version >= 3 || undefined, 60_000, 'memory version 3');

    const { page } = await consoleFor(a, 'memory');
    const rollback = page.getByRole('button', { name: 'Roll back to version 2' });
    await expect.poll(() => rollback.isVisible(), { timeout: 15_000 }).toBe(true);
    await rollback.click();
    const dialog = page.getByRole('dialog', { name: 'Roll back memory to version 2?' });
    await expect.poll(() => dialog.isVisible()).toBe(true);
    // Cancelling changes nothing.
    await dialog.getByRole('button', { name: 'Cancel' }).click();
    expect((await refl.memory(a)).files['domain-knowledge.md']).toBe('# Domain knowledge\nsecond');
    await rollback.click();
    await page.getByRole('button', { name: 'Confirm rollback' }).click();
    await eventually(
      async () => (await refl.memory(a)).files['domain-knowledge.md'] === '# Domain knowledge\nfirst' || undefined,
      15_000,
      'memory rolled back',
    );
  });
});

describe('layout and accessibility', () => {
  for (const width of [1280, 390]) {
    it(`fits ${width} px wide: nothing scrolls sideways and the inbox's buttons are reachable`, async () => {
      const a = uniqueId('a');
      await waitingRoutineRun(a);
      const { page } = await consoleFor(a, 'approvals', width);
      const approve = page.getByRole('article').filter({ hasText: a }).getByRole('button', { name: 'Approve' });
      await expect.poll(() => approve.isVisible(), { timeout: 15_000 }).toBe(true);
      const box = await approve.boundingBox();
      expect(box!.x + box!.width).toBeLessThanOrEqual(width);
      expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(width);
    });
  }

  it('axe finds no critical violation on the inbox and the conversation view', async () => {
    const a = uniqueId('a');
    await waitingRoutineRun(a);
    await keel.post(a, 'c1', { text: 'hello' }, { wait: 30 });
    // axe is put into the page by the test, which the page's own policy would refuse; the page runs under it above.
    const { page } = await open(`${base}/console/#/approvals`, { bypassCSP: true });
    await page.getByLabel('Agent').fill(a);
    await page.getByLabel('Agent').press('Enter');
    await expect.poll(() => page.getByRole('article').count(), { timeout: 15_000 }).toBeGreaterThan(0);
    await page.addScriptTag({ content: axe.source });
    const critical = async () =>
      page.evaluate<string[]>(
        "axe.run(document).then((r) => r.violations.filter((v) => v.impact === 'critical')" +
          ".map((v) => v.id + ': ' + v.help + ' ' + v.nodes.map((n) => n.target.join(' ')).join(', ')))",
      );
    expect(await critical()).toEqual([]);
    await page.getByRole('link', { name: 'Conversations' }).click();
    await page.getByRole('link', { name: /c1/ }).click();
    await expect.poll(() => page.getByRole('region', { name: 'Transcript' }).textContent()).toContain('hello');
    expect(await critical()).toEqual([]);
  });
});
