import { execFile } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectShop } from './support/evals';
import { startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { startShopHttp, type ShopHttp } from './support/mcp-shop';

/**
 * `npm run eval` as a team's CI runs it (issue 30): a suite of written YAML cases against a real Keel's API, with a
 * candidate file; it writes its reports and exits 1 when a case regresses, 0 when every case passes. Run as
 * `npm run eval`, the command the README gives.
 */
const run = promisify(execFile);
const REPO = path.resolve(__dirname, '..');
let keel: TestKeel;
let shop: ShopHttp;
let url: string;
let suite: string;
const agent = uniqueId('eval-cli');
const TOKEN = 'shop-bearer-eval-cli-77';

beforeAll(async () => {
  keel = await startTestKeel({});
  shop = await startShopHttp({ token: TOKEN });
  await keel.api.listen({ host: '127.0.0.1', port: 0 });
  url = `http://127.0.0.1:${(keel.api.server.address() as AddressInfo).port}`;
  await connectShop(keel, agent, shop, TOKEN);
  suite = await mkdtemp(path.join(os.tmpdir(), 'keel-evals-'));
  await writeFile(path.join(suite, 'suite.yaml'), `name: orders\nagent: ${agent}\nmode: live-model\n`);
  await writeFile(
    path.join(suite, 'order-status.yaml'),
    [
      'messages:',
      `  - '/tool shop__lookup_order {"orderId":"W1"}'`,
      'tools:',
      '  - tool: shop__lookup_order',
      '    arguments: { orderId: W1 }',
      '    content: "order W1: shipped (recorded)"',
      'expect:',
      '  - replyContains: "order W1: shipped (recorded)"',
      '  - toolCalled: shop__lookup_order',
      '    arguments: { orderId: W1 }',
      '  - outcome: replied',
      '  - turnsAtMost: 1',
      '',
    ].join('\n'),
  );
  await writeFile(
    path.join(suite, 'greeting.yaml'),
    'messages: ["hello there"]\nexpect:\n  - replyMatches: "^echo: hello"\n',
  );
}, 60_000);
afterAll(async () => {
  await keel?.stop();
  await shop?.close();
});

/** `npm run eval -- <args>` against the test's Keel: its exit code, and what it printed (stdout, then stderr). */
async function npmRunEval(args: string[]): Promise<{ code: number; stdout: string }> {
  try {
    const { stdout, stderr } = await run('npm', ['run', 'eval', '--', ...args, '--url', url], { cwd: REPO });
    return { code: 0, stdout: stdout + stderr };
  } catch (err) {
    const failed = err as { code: number; stdout: string; stderr: string };
    return { code: failed.code, stdout: failed.stdout + failed.stderr };
  }
}

async function evalCommand(
  candidate: unknown,
  out: string,
  more: string[] = [],
): Promise<{ code: number; stdout: string }> {
  const file = path.join(suite, `candidate-${path.basename(out)}.json`);
  await writeFile(file, JSON.stringify(candidate));
  return npmRunEval(['--suite', suite, '--candidate', file, '--out', out, ...more]);
}

describe('npm run eval', () => {
  it('exits 0 when every case passes, with its reports written', async () => {
    const out = await mkdtemp(path.join(os.tmpdir(), 'keel-eval-pass-'));
    const { code, stdout } = await evalCommand({}, out);
    expect(stdout).toContain('2 of 2 cases passed; 0 regressed');
    expect(code).toBe(0);
    const report = JSON.parse(await readFile(path.join(out, 'eval-report.json'), 'utf8')) as {
      cases: { caseId: string; status: string; modelCalls: number }[];
    };
    expect(report.cases.map((c) => [c.caseId, c.status])).toEqual([
      ['greeting', 'passed'],
      ['order-status', 'passed'],
    ]);
    expect(await readFile(path.join(out, 'eval-report.md'), 'utf8')).toContain('| order-status | passed |');
    // The tool call was answered from the case's recorded result: the server heard nothing.
    expect(shop.calls).toEqual([]);
  }, 60_000);

  it('exits 1 when a case regresses under the candidate', async () => {
    const out = await mkdtemp(path.join(os.tmpdir(), 'keel-eval-fail-'));
    const { code, stdout } = await evalCommand({ toolPolicies: { shop__lookup_order: 'deny' } }, out);
    expect(stdout).toContain('1 of 2 cases passed; 1 regressed');
    expect(code).toBe(1);
    const markdown = await readFile(path.join(out, 'eval-report.md'), 'utf8');
    expect(markdown).toContain('| order-status | failed (regressed) |');
    expect(markdown).toContain('no reply of any turn contains "order W1: shipped (recorded)"');
  }, 60_000);

  it('counts as a regression only a case its stored baseline saw pass', async () => {
    const deny = { toolPolicies: { shop__lookup_order: 'deny' } };
    const baseline = path.join(await mkdtemp(path.join(os.tmpdir(), 'keel-baseline-')), 'baseline.json');
    const out = () => mkdtemp(path.join(os.tmpdir(), 'keel-eval-baseline-'));
    // The baseline keeps this candidate's verdicts: order-status failing, greeting passing.
    const stored = await evalCommand(deny, await out(), ['--baseline', baseline, '--update-baseline']);
    expect(stored.code).toBe(0);
    expect(JSON.parse(await readFile(baseline, 'utf8'))).toMatchObject({
      cases: { greeting: 'passed', 'order-status': 'failed' },
    });
    // The same failure again is no regression.
    const again = await evalCommand(deny, await out(), ['--baseline', baseline]);
    expect(again.stdout).toContain('1 of 2 cases passed; 0 regressed');
    expect(again.code).toBe(0);
    // A case the baseline saw pass, failing now, is one: every turn stopped by a budget it cannot fit.
    const tight = { ...deny, budgets: { perTurnUsd: 0.000001 } };
    const broke = await evalCommand(tight, await out(), ['--baseline', baseline]);
    expect(broke.stdout).toContain('0 of 2 cases passed; 1 regressed');
    expect(broke.code).toBe(1);
  }, 90_000);
});

/**
 * The example suite this repository ships (evals/, as the README runs it; issue 50): offline, with the scripted model
 * and no tool server configured, the passing candidate passes and the one that denies the order lookup regresses.
 */
describe('the shipped example suite', () => {
  // An agent of its own (the suite names a1; the test database is shared) with no tool server, as after the README's
  // first request.
  const fresh = uniqueId('example');
  const lines = (stdout: string) => stdout.split('\n');
  beforeAll(async () => {
    const first = await keel.post(fresh, 'c1', { text: 'hello' }, { wait: 30 });
    expect(first.body.status).toBe('replied');
    const servers = await keel.call<{ items: unknown[] }>('GET', `/v1/agents/${fresh}/tool-servers`);
    expect(servers.body.items).toEqual([]);
  }, 60_000);
  const example = (candidate: string, out: string) =>
    npmRunEval(['--suite', 'evals/', '--candidate', `evals/${candidate}`, '--agent', fresh, '--out', out]);

  it('passes under evals/candidate.example.json, its tool call answered from the case', async () => {
    const out = await mkdtemp(path.join(os.tmpdir(), 'keel-example-pass-'));
    const { code, stdout } = await example('candidate.example.json', out);
    expect(lines(stdout), stdout).toContain(`2 of 2 cases passed; 0 regressed (${out}/eval-report.md)`);
    expect(code).toBe(0);
    const report = JSON.parse(await readFile(path.join(out, 'eval-report.json'), 'utf8')) as { evalId: string };
    const detail = await keel.call<{
      turns: {
        candidate: {
          reply: string;
          toolCalls: { name: string; arguments: unknown; answeredBy: string; isError: boolean }[];
        };
      }[];
    }>('GET', `/v1/agents/${fresh}/evals/${report.evalId}/cases/order-status`);
    expect(detail.body.turns.map((t) => t.candidate.reply)).toEqual([
      'tool result: order A-1001: shipped on 2 May, arriving 6 May',
    ]);
    expect(detail.body.turns[0]?.candidate.toolCalls).toEqual([
      { name: 'shop__lookup_order', arguments: { orderId: 'A-1001' }, answeredBy: 'recording', isError: false },
    ]);
  }, 60_000);

  it('regresses under evals/candidate.deny-lookup.json, and exits 1', async () => {
    const out = await mkdtemp(path.join(os.tmpdir(), 'keel-example-deny-'));
    const { code, stdout } = await example('candidate.deny-lookup.json', out);
    expect(lines(stdout), stdout).toContain(`1 of 2 cases passed; 1 regressed (${out}/eval-report.md)`);
    expect(code).toBe(1);
    expect(await readFile(path.join(out, 'eval-report.md'), 'utf8')).toContain(
      '| order-status | failed (regressed) | — | ',
    );
    const report = JSON.parse(await readFile(path.join(out, 'eval-report.json'), 'utf8')) as {
      cases: { caseId: string; status: string; reasons: string[] }[];
    };
    expect(report.cases.map((c) => [c.caseId, c.status, c.reasons])).toEqual([
      ['greeting', 'passed', []],
      [
        'order-status',
        'failed',
        [
          'no reply of any turn contains "shipped on 2 May"',
          'shop__lookup_order was not called with {"orderId":"A-1001"}',
        ],
      ],
    ]);
  }, 60_000);
});
