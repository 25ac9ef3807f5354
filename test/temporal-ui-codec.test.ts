import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversationWorkflowId } from '../domain/ids';
import { startDevServer, type DevServer } from '../scripts/dev-server';
import { freePort } from '../scripts/ports';
import { startTestKeel, uniqueId, type TestKeel } from './support/keel';

/**
 * The Temporal Web UI against Keel's codec server, in Debian's Chromium: a dev server whose UI is started with
 * `--ui-codec-endpoint <api>/codec` (as npm start starts it), a Keel that seals its payloads and has an operator
 * token. Until the operator signs in to Keel's console the UI shows ciphertext; after, the message in clear.
 * KEEL_UI_SCREENSHOTS=<folder> keeps the two pictures (docs/img has them).
 */
const CHROMIUM = process.env.KEEL_CHROMIUM ?? '/usr/bin/chromium';
const OPERATOR = 'temporal-ui-operator-token';
const KEY = `ui:${Buffer.alloc(32, 9).toString('base64')}`;

let temporal: DevServer;
let keel: TestKeel;
let api: string;
let ui: string;
let browser: Browser;
let shots: string;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: apt-get install chromium (.ci/run does)`);
  const [port, uiPort, apiPort] = [await freePort(), await freePort(), await freePort()];
  api = `http://127.0.0.1:${apiPort}`;
  ui = `http://127.0.0.1:${uiPort}`;
  temporal = await startDevServer({ port, uiPort, codecEndpoint: `${api}/codec`, stdio: 'ignore' });
  keel = await startTestKeel({
    temporalAddress: temporal.address,
    payloadKeys: KEY,
    tokens: new Map([[OPERATOR, '*']]),
    temporalUiUrl: ui,
  });
  await keel.api.listen({ host: '127.0.0.1', port: apiPort });
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  shots = process.env.KEEL_UI_SCREENSHOTS ?? (await mkdtemp(path.join(os.tmpdir(), 'keel-ui-shots-')));
});
afterAll(async () => {
  await browser?.close();
  await keel?.stop();
  await temporal?.stop();
  if (!process.env.KEEL_UI_SCREENSHOTS && shots) await rm(shots, { recursive: true, force: true });
});

/** A run's page in the UI, with its model call's event opened: the answer it recorded. */
async function history(page: Page, workflowId: string, runId: string): Promise<void> {
  await page.goto(`${ui}/namespaces/default/workflows/${encodeURIComponent(workflowId)}/${runId}/history`);
  const call = page.locator('table').getByText('callTurnModel').first();
  await call.waitFor({ timeout: 30_000 });
  await call.click();
}

describe('the Temporal UI decodes through Keel’s codec server', () => {
  it('shows ciphertext without the operator’s sign-in, and the message in clear after it', async () => {
    const [agent, conv] = [uniqueId('a'), uniqueId('c')];
    const marker = `marker-${uniqueId('m')}`;
    const sent = await keel.post(agent, conv, { text: `remember ${marker}` }, { wait: 30, token: OPERATOR });
    expect(sent.body.status).toBe('replied');
    const workflowId = conversationWorkflowId(agent, conv);
    const { runId } = await keel.client.workflow.getHandle(workflowId).describe();

    const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
    // What an operator ticks in the UI's codec settings once: this browser's endpoint, with credentials.
    const settings = {
      endpoint: JSON.stringify(`${api}/codec`),
      includeCredentials: 'true',
      overrideRemoteCodecConfiguration: 'true',
    };
    await context.addInitScript(
      `if (location.origin === ${JSON.stringify(ui)}) ` +
        `for (const [k, v] of Object.entries(${JSON.stringify(settings)})) localStorage.setItem(k, v);`,
    );
    const page = await context.newPage();
    try {
      await history(page, workflowId, runId);
      // Each payload as the server holds it: encoding binary/encrypted (base64 in the UI's JSON), and ciphertext.
      const sealedEncoding = Buffer.from('binary/encrypted').toString('base64');
      await expect.poll(() => page.locator('body').innerText(), { timeout: 10_000 }).toContain(sealedEncoding);
      expect(await page.locator('body').innerText()).not.toContain(marker);
      await page.getByText(sealedEncoding).last().scrollIntoViewIfNeeded();
      await page.screenshot({ path: path.join(shots, 'temporal-ui-sealed.png') });

      // The operator signs in to Keel's console, which hands the token to the codec server as an HttpOnly cookie.
      await page.goto(`${api}/console/`);
      await page.getByLabel(/token/i).fill(OPERATOR);
      await page.getByRole('button', { name: /sign in/i }).click();
      await expect
        .poll(async () => (await context.cookies(`${api}/codec/decode`)).map((c) => c.name), { timeout: 10_000 })
        .toContain('keel_codec');

      await history(page, workflowId, runId);
      await expect
        .poll(() => page.locator('body').innerText(), { timeout: 30_000 })
        .toContain(`echo: remember ${marker}`);
      await page.getByText(`echo: remember ${marker}`).first().scrollIntoViewIfNeeded();
      await page.screenshot({ path: path.join(shots, 'temporal-ui-decoded.png') });
    } finally {
      await context.close();
    }
  });
});
