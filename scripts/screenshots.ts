/**
 * npm run screenshots: the Temporal UI pictures of docs/operators.md, taken by headless Chromium (Debian's
 * `chromium` package) against a Keel that this script starts with `npm start` on free ports and fills with a demo
 * agent: conversations, a delegate, a job whose runs fail, a routine run waiting for approval.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
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
  } finally {
    await keel.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
