/**
 * `npm run fuzz`: property-based fuzzing of the REST API with schemathesis (from PyPI) against the OpenAPI document
 * at /docs/json. It starts a whole Keel on free ports (the scripted model, an operator token), seeds one agent with a
 * conversation, a task, a delegate, a job, an app and a routine so that generated requests also reach real
 * resources (test/fuzz/schemathesis.toml draws path parameters from those ids half the time), then runs every check:
 * no 5xx, every status, header, content type and body as the document says, bad input refused, good input accepted.
 * Fails when schemathesis finds anything or generated fewer than KEEL_FUZZ_MIN_REQUESTS (1,000) requests. Before it,
 * the document itself must pass the reference validator (openapi-spec-validator) and name every operation.
 *
 * Two ways to run it:
 * - `npm run fuzz` (CI): a fixed seed, 15 examples an operation, and first the examples of every earlier failure,
 *   replayed from Hypothesis's database in test/fuzz/examples (from a copy: the committed files never change). The
 *   same tree fuzzes the same way on every run: a finding reproduces, and a change is refused only for what it broke.
 * - `npm run fuzz -- --explore`: a fresh seed (printed, for `--explore --seed N` to run it again) and 50 examples an
 *   operation, to find what the fixed seed does not. Each new failure is added to test/fuzz/examples, to be committed
 *   with its fix and a test, so that CI replays it from then on. Nothing is taken out: a fixed bug's examples stay.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash, randomInt } from 'node:crypto';
import { once } from 'node:events';
import { existsSync, mkdirSync } from 'node:fs';
import { cp, readdir, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
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

/** CI's seed: any fixed number would do; changing it changes every generated example at once. */
const CI_SEED = 50;
/** Examples an operation (and steps of the stateful phase's scenarios) in CI, and when exploring. */
const CI_EXAMPLES = 15;
const EXPLORE_EXAMPLES = 50;
/** Hypothesis's example database (DirectoryBasedExampleDatabase): the examples of earlier failures, committed. */
const EXAMPLES_DIR = path.join(REPO_ROOT, 'test', 'fuzz', 'examples');

interface FuzzRun {
  explore: boolean;
  seed: number;
  examples: number;
}

function fuzzRun(argv: string[]): FuzzRun {
  const { values } = parseArgs({ args: argv, options: { explore: { type: 'boolean' }, seed: { type: 'string' } } });
  const explore = values.explore ?? false;
  const seed = values.seed === undefined ? (explore ? randomInt(2 ** 31) : CI_SEED) : Number(values.seed);
  if (!Number.isSafeInteger(seed) || seed < 0) throw new Error(`--seed takes a whole number, not ${values.seed}`);
  return { explore, seed, examples: explore ? EXPLORE_EXAMPLES : CI_EXAMPLES };
}

/** Keel's folder of the per-user cache. */
const cacheDir = () => path.join(process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache'), 'keel');
const hypothesisHome = () => path.join(cacheDir(), 'hypothesis');

/** A Python tool from PyPI in its own virtualenv under the per-user cache, installed once; the path of its command. */
function pythonTool(pkg: string, version: string, command: string): string {
  const venv = path.join(cacheDir(), `${pkg}-${version}`);
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

/** The folder of a key, or the file of a value, in Hypothesis's DirectoryBasedExampleDatabase: SHA-384's first 16. */
const dbName = (bytes: Buffer | string) => createHash('sha384').update(bytes).digest('hex').slice(0, 16);
/** The key whose values are the database's keys. */
const META_KEYS = dbName('.hypothesis-keys');

/**
 * The failures of a run (the examples under each test's own key) that `to` lacks, copied over from `from`; their
 * files, relative to the folder. Hypothesis also keeps a test's secondary and pareto examples (`<key>.secondary`,
 * `<key>.pareto`: material for later runs, hundreds for a passing run): those stay out of the committed folder.
 * Add-only: an example Hypothesis dropped from the copy because it passes now stays in `to`, as a fixed bug's test.
 */
async function addNewFailures(from: string, to: string): Promise<string[]> {
  const metaDir = path.join(from, META_KEYS);
  const keys = existsSync(metaDir)
    ? await Promise.all((await readdir(metaDir)).map((f) => readFile(path.join(metaDir, f))))
    : [];
  const failureKeys = keys.filter((k) => !/\.(secondary|pareto)$/.test(k.toString('latin1')));
  const added: string[] = [];
  for (const key of failureKeys) {
    const dir = dbName(key);
    if (!existsSync(path.join(from, dir))) continue;
    const values = (await readdir(path.join(from, dir))).map((v) => path.join(dir, v));
    // The key's own entry among the keys, so that the committed folder lists what it holds, as Hypothesis does.
    for (const name of [...values, path.join(META_KEYS, dbName(key))]) {
      if (existsSync(path.join(to, name))) continue;
      await cp(path.join(from, name), path.join(to, name));
      added.push(name);
    }
  }
  return added;
}

/**
 * The API's and the worker's lines at error level (pino's JSON: a 500's request id, route and cause), every one of
 * them, from a log where the dev server's own lines are most of the rest.
 */
async function errorLines(logFile: string): Promise<string[]> {
  const lines = (await readFile(logFile, 'utf8')).split('\n');
  return lines.filter((line) => {
    if (!line.startsWith('{')) return false;
    try {
      const level = (JSON.parse(line) as { level?: unknown }).level;
      return typeof level === 'number' && level >= 50;
    } catch {
      return false;
    }
  });
}

async function main(): Promise<void> {
  const run = fuzzRun(process.argv.slice(2));
  console.log(
    run.explore
      ? `fuzz: exploring with seed ${run.seed}, ${run.examples} examples an operation ` +
          `(to run it again: npm run fuzz -- --explore --seed ${run.seed})`
      : `fuzz: seed ${run.seed}, ${run.examples} examples an operation, earlier failures replayed from ` +
          path.relative(REPO_ROOT, EXAMPLES_DIR),
  );
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
    // schemathesis's crash files (for `st replay`) go to the per-user cache too, not to a .schemathesis folder here.
    const crashes = `[cache]\ndirectory = ${JSON.stringify(path.join(cacheDir(), 'schemathesis-cache'))}\n`;
    await writeFile(config, `${base}\n${dictionaries}\n${crashes}`);
    // Hypothesis deletes from its database the examples that pass now, and adds new failures: it gets a copy, which
    // CI throws away, and from which --explore adds only the new failures back (schemathesis takes a folder's path,
    // not a read-only database of Hypothesis's).
    const examples = path.join(keel.dataDir, 'examples');
    mkdirSync(EXAMPLES_DIR, { recursive: true });
    await cp(EXAMPLES_DIR, examples, { recursive: true });
    // Not spawnSync: this process reads Keel's stdout (the API's log) into the log file while schemathesis runs, and
    // a blocked reader would leave the lines unread until the end, and the API writing into a full pipe.
    const schemathesis = spawn(
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
        '--seed',
        String(run.seed),
        '--max-examples',
        String(run.examples),
        '--generation-database',
        examples,
      ],
      // Hypothesis keeps its caches (Unicode tables) beside the virtualenvs, not in a .hypothesis folder of the tree.
      { stdio: 'inherit', env: { ...process.env, NO_COLOR: '1', HYPOTHESIS_STORAGE_DIRECTORY: hypothesisHome() } },
    );
    const [code, signal] = (await once(schemathesis, 'exit')) as [number | null, NodeJS.Signals | null];
    // Only a run that failed has findings: a passing one may still leave an example under a test's own key, one that
    // Hypothesis saw fail once and not again, which schemathesis reports as passing (a DELETE of a seeded resource
    // answers otherwise the second time), and which CI should not replay as a finding.
    if (run.explore && code !== 0) {
      const added = await addNewFailures(examples, EXAMPLES_DIR);
      if (added.length)
        console.log(`fuzz: ${added.length} new files in ${path.relative(REPO_ROOT, EXAMPLES_DIR)}: commit them`);
    }
    if (code !== 0) {
      const generated = await generatedCount(reportDir).catch(() => undefined);
      console.error(`fuzz: ${generated ?? 'an unknown number of'} generated requests (seed ${run.seed})`);
      const errors = await errorLines(logFile);
      if (errors.length) {
        console.error(`fuzz: Keel's ${errors.length} lines at error level follow (from ${logFile}):`);
        console.error(errors.join('\n'));
      } else {
        console.error(`fuzz: Keel logged nothing at error level; the last 100 lines of ${logFile} follow:`);
        console.error((await readFile(logFile, 'utf8')).split('\n').slice(-100).join('\n'));
      }
      throw new Error(`schemathesis found problems (exit ${code ?? signal}; seed ${run.seed})`);
    }
    const generated = await generatedCount(reportDir);
    console.log(`fuzz: ${generated} generated requests, no failures (seed ${run.seed})`);
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
