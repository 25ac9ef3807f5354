/**
 * npm run screenshots: the Temporal UI and console pictures of docs/operators.md, taken by headless Chromium (Debian's
 * `chromium` package; the console's through playwright-core) against a Keel that this script starts with `npm start`
 * on free ports and fills with a demo agent: conversations, a delegate, a job whose runs fail, a routine run waiting
 * for approval.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { startKeel } from './keel-process';
import { REPO_ROOT } from './processes';

const OUT = path.join(REPO_ROOT, 'docs', 'img');
const AGENT = 'demo';

async function main(): Promise<void> {
  const chromium = ['chromium', 'chromium-browser', 'google-chrome'].find((c) => {
    try {
      execFileSync('which', [c], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  });
  if (!chromium) throw new Error('no Chromium found: apt-get install chromium');
  const keel = await startKeel({
    // A failing job fails for good within seconds, for the picture.
    KEEL_JOB_BACKOFF_MS: '200',
  });
  const { api, ui } = keel;
  try {
    const call = async (method: string, url: string, body?: unknown) => {
      const res = await fetch(`${api}${url}`, {
        method,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      return res.json() as Promise<Record<string, unknown>>;
    };
    await call('PUT', `/v1/agents/${AGENT}`, { name: 'Demo agent' });
    await call('POST', `/v1/agents/${AGENT}/conversations/support/messages?wait=30`, { text: 'hello' });
    await call('POST', `/v1/agents/${AGENT}/conversations/research/messages?wait=30`, {
      text: '/tool spawn_delegate {"text":"/work 3 200 look it up","historyMode":"clean"}',
    });
    const at = new Date(Date.now() + 2_000).toISOString();
    await call('POST', `/v1/agents/${AGENT}/jobs`, {
      name: 'Nightly report',
      schedule: { kind: 'at', at },
      task: '/error 10 the report source is down',
    });
    await call('PUT', `/v1/agents/${AGENT}/apps/crm`, { name: 'CRM', tables: [{ name: 'leads', columns: ['name'] }] });
    const tool = {
      name: 'greetLeads',
      inputs: ['input'],
      code: "async function greetLeads() { await send('Hello leads'); return 'greeted'; }",
    };
    await call('PUT', `/v1/agents/${AGENT}/apps/crm/routines/greet`, {
      label: 'Greet leads',
      schedule: { expr: 'daily' },
      prompt: `Greet the leads /author ${JSON.stringify(tool)}`,
    });
    await call('POST', `/v1/agents/${AGENT}/apps/crm/routines/greet/run`);
    // Let the job fail three times and the routine reach its gate.
    await new Promise((r) => setTimeout(r, 12_000));

    await rm(OUT, { recursive: true, force: true });
    await mkdir(OUT, { recursive: true });
    const shoot = (name: string, query: string) => {
      const url = `${ui}/namespaces/default/workflows?query=${encodeURIComponent(query)}`;
      execFileSync(
        chromium,
        [
          '--headless',
          '--no-sandbox',
          '--disable-gpu',
          '--hide-scrollbars',
          '--window-size=1440,900',
          '--virtual-time-budget=10000',
          `--screenshot=${path.join(OUT, name)}`,
          url,
        ],
        {
          stdio: 'ignore',
        },
      );
      console.log(`docs/img/${name}: ${query}`);
    };
    shoot('by-agent.png', `KeelAgentId = "${AGENT}"`);
    shoot('failed-job-runs.png', `KeelKind = "job" AND KeelOutcome = "failed"`);
    shoot('waiting-approval.png', `KeelOutcome = "needs_approval"`);
    shoot('one-conversation.png', `WorkflowId = "conv:${AGENT}:support"`);
    await shootConsole(execFileSync('which', [chromium]).toString().trim(), api);
  } finally {
    await keel.stop();
  }
}

/** The operator console's views (docs/operators.md), through playwright-core driving the same Chromium. */
async function shootConsole(executablePath: string, api: string): Promise<void> {
  const browser = await chromium.launch({ executablePath, headless: true, args: ['--no-sandbox'] });
  try {
    for (const [name, view, width, ready] of [
      ['console-approvals.png', 'approvals', 1280, 'Greet leads (crm/greet)'],
      ['console-approvals-narrow.png', 'approvals', 390, 'Greet leads (crm/greet)'],
      ['console-conversation.png', 'conversations/support', 1280, 'hello'],
      ['console-jobs.png', 'jobs', 1280, 'Nightly report'],
    ] as const) {
      const page = await browser.newPage({ viewport: { width, height: 900 } });
      await page.goto(`${api}/console/#/${view}`);
      await page.getByLabel('Agent').fill(AGENT);
      await page.getByLabel('Agent').press('Enter');
      await page.getByText(ready).first().waitFor({ timeout: 20_000 });
      await page.screenshot({ path: path.join(OUT, name), fullPage: true });
      await page.close();
      console.log(`docs/img/${name}: the console's ${view} view, ${width} px wide`);
    }
  } finally {
    await browser.close();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
