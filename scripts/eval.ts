/**
 * `npm run eval -- --suite evals/ --candidate candidate.json`: runs a suite against a running Keel (its API) and a
 * candidate configuration, writes a Markdown and a JSON report, and exits 1 when a case regresses against the suite's
 * stored baseline, so that it can gate a team's CI. docs/evals.md describes the suite's files.
 */
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { evalReport, regressionsOf, type Baseline, type Evaluation } from './eval-report';

const USAGE = `usage: npm run eval -- --suite <dir> [--candidate <file.json>] [--agent <id>] [--mode replay|live-model]
  [--url <Keel API>] [--token <token>] [--baseline <file>] [--update-baseline] [--out <dir>] [--timeout <s>]`;

/** The suite's settings (suite.yaml): its agent, mode, and the recorded conversations it takes. */
interface SuiteFile {
  name?: string;
  agent?: string;
  mode?: 'replay' | 'live-model';
  recorded?: unknown;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      suite: { type: 'string' },
      candidate: { type: 'string' },
      agent: { type: 'string' },
      mode: { type: 'string' },
      url: { type: 'string', default: process.env.KEEL_URL ?? 'http://127.0.0.1:3000' },
      token: { type: 'string', default: process.env.KEEL_TOKEN },
      baseline: { type: 'string' },
      'update-baseline': { type: 'boolean', default: false },
      out: { type: 'string', default: 'eval-report' },
      timeout: { type: 'string', default: '1800' },
    },
  });
  if (!values.suite) return usage('--suite is required');
  const suiteDir = path.resolve(values.suite);
  const { settings, written } = await readSuite(suiteDir);
  const agent = values.agent ?? settings.agent;
  if (!agent) return usage('the agent is neither given (--agent) nor named in suite.yaml');
  const mode = values.mode ?? settings.mode ?? 'replay';
  if (mode !== 'replay' && mode !== 'live-model') return usage(`--mode is replay or live-model, not ${mode}`);
  const candidate: unknown = values.candidate ? JSON.parse(await readFile(values.candidate, 'utf8')) : {};
  const suite = settings.name ?? path.basename(suiteDir);
  const body = {
    mode,
    candidate,
    suite,
    ...(settings.recorded ? { recorded: settings.recorded } : {}),
    ...(written.length ? { written } : {}),
  };

  const api = apiClient(values.url, values.token);
  const started = await api<Evaluation>('POST', `/v1/agents/${encodeURIComponent(agent)}/evals`, body);
  console.error(`evaluation ${started.id}: ${started.cases.length} cases, ${mode}`);
  const timeoutS = Number(values.timeout);
  if (!Number.isFinite(timeoutS) || timeoutS <= 0)
    return usage(`--timeout is a number of seconds, not ${values.timeout}`);
  const finished = await waitForEnd(api, agent, started.id, Date.now() + timeoutS * 1_000);
  if (!finished) {
    console.error(`evaluation ${started.id} was still running after ${timeoutS} s`);
    return 1;
  }

  const baselinePath = values.baseline ?? path.join(suiteDir, 'baseline.json');
  const baseline = existsSync(baselinePath)
    ? (JSON.parse(await readFile(baselinePath, 'utf8')) as Baseline)
    : undefined;
  const regressions = regressionsOf(finished, baseline);
  const report = evalReport({ evaluation: finished, suite, agent, candidate, baseline, regressions });
  await mkdir(values.out, { recursive: true });
  await writeFile(path.join(values.out, 'eval-report.json'), JSON.stringify(report.json, null, 2) + '\n');
  await writeFile(path.join(values.out, 'eval-report.md'), report.markdown);
  if (values['update-baseline']) {
    const cases = Object.fromEntries(finished.cases.map((c) => [c.caseId, c.status]));
    await writeFile(baselinePath, JSON.stringify({ evalId: finished.id, cases }, null, 2) + '\n');
    console.error(`baseline written: ${baselinePath}`);
  }
  const summary = finished.summary && 'cases' in finished.summary ? finished.summary : undefined;
  const failure = finished.summary && 'error' in finished.summary ? finished.summary.error : 'unknown';
  const where = path.join(values.out, 'eval-report.md');
  console.log(
    summary
      ? `${summary.passed} of ${summary.cases} cases passed; ${regressions.length} regressed (${where})`
      : `the evaluation failed: ${failure}`,
  );
  if (finished.status !== 'finished') return 1;
  return regressions.length > 0 && !values['update-baseline'] ? 1 : 0;
}

/** suite.yaml's settings, and every other YAML file's written case (named after its file unless it says). */
async function readSuite(dir: string): Promise<{ settings: SuiteFile; written: Record<string, unknown>[] }> {
  const files = (await readdir(dir)).filter((f) => /\.ya?ml$/.test(f)).sort();
  let settings: SuiteFile = {};
  const written: Record<string, unknown>[] = [];
  for (const file of files) {
    const parsed: unknown = parseYaml(await readFile(path.join(dir, file), 'utf8'));
    if (typeof parsed !== 'object' || parsed === null) throw new Error(`${file} holds no YAML mapping`);
    if (/^suite\.ya?ml$/.test(file)) settings = parsed;
    else written.push({ name: file.replace(/\.ya?ml$/, ''), ...(parsed as Record<string, unknown>) });
  }
  return { settings, written };
}

type Api = <T>(method: 'GET' | 'POST', url: string, body?: unknown) => Promise<T>;

function apiClient(base: string, token: string | undefined): Api {
  return async <T>(method: 'GET' | 'POST', url: string, body?: unknown): Promise<T> => {
    const res = await fetch(new URL(url, base), {
      method,
      headers: {
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...(token ? { authorization: `Bearer ${token}` } : {}),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${url} answered ${res.status}: ${text}`);
    return JSON.parse(text) as T;
  };
}

/** The evaluation once it has ended, asked again each second while it runs; undefined past the deadline. */
async function waitForEnd(api: Api, agent: string, id: string, deadline: number): Promise<Evaluation | undefined> {
  while (Date.now() < deadline) {
    const got = await api<Evaluation>('GET', `/v1/agents/${encodeURIComponent(agent)}/evals/${id}`);
    if (got.status !== 'running') return got;
    await new Promise((r) => setTimeout(r, 1_000));
  }
  return undefined;
}

function usage(problem: string): number {
  console.error(`${problem}\n${USAGE}`);
  return 2;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(2);
  },
);
