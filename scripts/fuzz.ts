/**
 * `npm run fuzz`: property-based fuzzing of the REST API with schemathesis (from PyPI) against the OpenAPI document
 * at /docs/json. It starts a whole Keel on free ports (the scripted model, an operator token), seeds one agent with a
 * conversation, a task, a delegate, a job, an app and a routine so that generated requests also reach real
 * resources (test/fuzz/schemathesis.toml draws path parameters from those ids half the time), then runs every check:
 * no 5xx, every status, header, content type and body as the document says, bad input refused, good input accepted.
 * Fails when schemathesis finds anything or generated fewer than KEEL_FUZZ_MIN_REQUESTS (1,000) requests. Before it,
 * the document itself must pass the reference validator (openapi-spec-validator) and name every operation.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { conversationWorkflowId } from '../domain/ids';
import { startKeel } from './keel-process';
import { REPO_ROOT } from './processes';

// Not 4.32: its link inference from response bodies crashes the run ("Invalid IPv6 URL") on a generated string
// that a 2xx answer echoes back, such as an agent named "http://[" (urlsplit raises; CI met it).
const SCHEMATHESIS_VERSION = '4.31.1';
const TOKEN = 'fuzz-operator';
const AGENT = 'fz';
const MIN_REQUESTS = Number(process.env.KEEL_FUZZ_MIN_REQUESTS ?? 1_000);

const SPEC_VALIDATOR_VERSION = '0.8.4';

/** A Python tool from PyPI in its own virtualenv under the per-user cache, installed once; the path of its command. */
function pythonTool(pkg: string, version: string, command: string): string {
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  const venv = path.join(base, 'keel', `${pkg}-${version}`);
  const bin = path.join(venv, 'bin', command);
  if (existsSync(bin)) return bin;
  mkdirSync(path.dirname(venv), { recursive: true });
  console.log(`fuzz: installing ${pkg} ${version} into ${venv}…`);
  const run = (cmd: string, args: string[]) => {
    const r = spawnSync(cmd, args, { stdio: 'inherit' });
    if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.status ?? r.signal})`);
  };
  run('python3', ['-m', 'venv', venv]);
  run(path.join(venv, 'bin', 'pip'), ['install', '--quiet', '--disable-pip-version-check', `${pkg}==${version}`]);
  return bin;
}

/**
 * The OpenAPI document as the reference validator (openapi-spec-validator) reads it, and every operation named by an
 * operationId (generated clients take their method names from it). Throws naming what is wrong.
 */
async function checkDocument(api: string, dir: string): Promise<void> {
  const doc = (await (await fetch(`${api}/docs/json`)).json()) as {
    paths: Record<string, Record<string, { operationId?: string }>>;
  };
  const unnamed = Object.entries(doc.paths).flatMap(([p, ops]) =>
    Object.entries(ops)
      .filter(([, op]) => !op.operationId)
      .map(([method]) => `${method.toUpperCase()} ${p}`),
  );
  if (unnamed.length) throw new Error(`operations without an operationId: ${unnamed.join(', ')}`);
  const file = path.join(dir, 'openapi.json');
  await writeFile(file, JSON.stringify(doc));
  const validator = pythonTool('openapi-spec-validator', SPEC_VALIDATOR_VERSION, 'openapi-spec-validator');
  const r = spawnSync(validator, [file], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openapi-spec-validator refuses /docs/json:\n${r.stdout}${r.stderr}`);
  console.log(`fuzz: openapi-spec-validator accepts /docs/json; ${Object.keys(doc.paths).length} paths, all named`);
}

async function seed(api: string): Promise<Record<string, string | number>> {
  const call = async (method: string, url: string, body?: unknown): Promise<Record<string, unknown>> => {
    const res = await fetch(`${api}${url}`, {
      method,
      headers: {
        authorization: `Bearer ${TOKEN}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = (await res.json()) as Record<string, unknown>;
    if (!res.ok) throw new Error(`seed: ${method} ${url} → ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  const v1 = `/v1/agents/${AGENT}`;
  await call('PUT', v1, { name: 'Fuzzed agent' });
  await call('POST', `${v1}/conversations/c1/messages?wait=30`, { text: 'hello' });
  await call('PUT', `${v1}/skills/research`, { body: '# Research\nLook things up.' });
  const task = await call('POST', `${v1}/tasks`, { title: 'Write the summary', status: 'ready' });
  const spawned = await call('POST', `${v1}/conversations/c1/messages?wait=30`, {
    text: `/tool spawn_delegate {"task":${String(task.number)}}`,
  });
  const delegateId = /spawned delegate (\S+)/.exec(JSON.stringify(spawned))?.[1] ?? '';
  const job = await call('POST', `${v1}/jobs`, {
    name: 'Hourly digest',
    schedule: { kind: 'every', intervalMs: 3_600_000 },
    task: 'digest',
  });
  await call('PUT', `${v1}/apps/crm`, { name: 'CRM', tables: [{ name: 'leads', columns: ['name', 'score'] }] });
  await call('POST', `${v1}/apps/crm/tables/leads/records`, { name: 'Ada', score: 3 });
  const tool = { name: 'scoreLeads', inputs: ['input'], code: "async function scoreLeads() { return 'scored'; }" };
  await call('PUT', `${v1}/apps/crm/routines/triage`, {
    label: 'Score leads',
    schedule: { expr: 'daily' },
    prompt: `Score the leads /author ${JSON.stringify(tool)}`,
  });
  const run = await call('POST', `${v1}/apps/crm/routines/triage/run`);
  return {
    agentId: AGENT,
    conversationId: 'c1',
    number: Number(task.number),
    delegateId,
    id: String(job.id),
    appId: 'crm',
    table: 'leads',
    slug: 'triage',
    runId: typeof run.runId === 'string' ? run.runId : '',
    name: 'research',
    version: 1,
    workflowId: conversationWorkflowId(AGENT, 'c1'),
  };
}

/** The number of generated test cases, from schemathesis's JSON report (`test_cases.generated`). */
async function generatedCount(reportDir: string): Promise<number> {
  const [file] = (await readdir(reportDir)).filter((f) => f.startsWith('json') && f.endsWith('.json'));
  if (!file) throw new Error(`no JSON report in ${reportDir}`);
  const report = JSON.parse(await readFile(path.join(reportDir, file), 'utf8')) as {
    test_cases?: { generated?: number };
  };
  return report.test_cases?.generated ?? 0;
}

async function main(): Promise<void> {
  const st = pythonTool('schemathesis', SCHEMATHESIS_VERSION, 'st');
  // Keel's own logs (the dev server's included) go to a file, printed only when the run fails.
  const logFile = path.join(os.tmpdir(), `keel-fuzz-${process.pid}.log`);
  // Generated stdio tool servers are never run: no command is allowed (a PUT of one is refused with 400).
  const keel = await startKeel({ KEEL_API_TOKENS: `${TOKEN}=*`, KEEL_TOOL_COMMANDS: 'none' }, { logFile });
  console.log(`fuzz: Keel's logs are in ${logFile}`);
  try {
    await checkDocument(keel.api, keel.dataDir);
    const ids = await seed(keel.api);
    console.log(`fuzz: Keel at ${keel.api}, seeded ${JSON.stringify(ids)}`);
    // The checked-in config plus the seeded ids as dictionaries (schemathesis reads one config file).
    const base = await readFile(path.join(REPO_ROOT, 'test', 'fuzz', 'schemathesis.toml'), 'utf8');
    const dictionaries = Object.entries(ids)
      .filter(([, v]) => v)
      .map(
        ([k, v]) =>
          `[dictionaries.${k}]\nvalues = [${JSON.stringify(v)}]\n\n` +
          `[parameters."path.${k}"]\ndictionary = "${k}"\nprobability = 0.5\n`,
      )
      .join('\n');
    const reportDir = path.join(keel.dataDir, 'schemathesis-report');
    const config = path.join(keel.dataDir, 'schemathesis.toml');
    await writeFile(config, `${base}\n${dictionaries}`);
    const result = spawnSync(
      st,
      [
        '--config-file',
        config,
        'run',
        `${keel.api}/docs/json`,
        '--url',
        keel.api,
        '-H',
        `Authorization: Bearer ${TOKEN}`,
        '--report',
        'json,ndjson',
        '--report-dir',
        reportDir,
      ],
      { stdio: 'inherit', env: { ...process.env, NO_COLOR: '1' } },
    );
    if (result.status !== 0) {
      console.error(`fuzz: Keel's logs follow (the last 100 lines of ${logFile})`);
      console.error((await readFile(logFile, 'utf8')).split('\n').slice(-100).join('\n'));
      throw new Error(`schemathesis found problems (exit ${result.status ?? result.signal})`);
    }
    const generated = await generatedCount(reportDir);
    console.log(`fuzz: ${generated} generated requests, no failures`);
    if (generated < MIN_REQUESTS)
      throw new Error(`only ${generated} requests were generated; at least ${MIN_REQUESTS} are required`);
  } finally {
    await keel.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(1);
  },
);
