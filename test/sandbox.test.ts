import { describe, expect, it } from 'vitest';
import { BROWSER_UNAVAILABLE, simulatedCapabilities } from '../services/routine-capabilities';
import { CapabilityError, runInSandbox, type CapabilityHost } from '../adapters/sandbox';

// The real isolated-vm sandbox, in this process: every escape must fail with a clear error and leave the process
// (the worker, in production) running the next tool normally.
const limits = { memoryMb: 64, timeoutMs: 1_500 };
const tables = [{ name: 'leads', columns: ['name', 'email'] }];
const run = (code: string, host: CapabilityHost = simulatedCapabilities(tables), args: Record<string, string> = {}) =>
  runInSandbox({ name: 'tool', code }, args, host, limits);
const healthy = async () =>
  expect(await run("async function tool() { return (await data.list('leads')).length; }")).toEqual({
    status: 'ok',
    result: 1,
  });

describe('sandbox escapes fail with a clear error and the process survives', () => {
  it.each([
    [
      "require('fs')",
      "async function tool() { return require('fs').readFileSync('/etc/passwd', 'utf8'); }",
      'ReferenceError: require is not defined',
    ],
    ['process.env', 'async function tool() { return process.env; }', 'ReferenceError: process is not defined'],
    [
      'fetch',
      "async function tool() { return await fetch('http://127.0.0.1:1/'); }",
      'ReferenceError: fetch is not defined',
    ],
    [
      'timers',
      'async function tool() { return await new Promise((r) => setTimeout(r, 10)); }',
      'ReferenceError: setTimeout is not defined',
    ],
  ])('%s', async (_what, code, detail) => {
    expect(await run(code)).toEqual({ status: 'error', detail });
    await healthy();
  });

  it('an infinite loop is killed at the wall-clock limit, also after an await', async () => {
    for (const code of [
      'async function tool() { for (;;) {} }',
      "async function tool() { await data.list('leads'); for (;;) {} }",
    ]) {
      const started = Date.now();
      expect(await run(code)).toEqual({
        status: 'error',
        detail: 'this took too long, so the run was stopped at the 1.5 s limit',
      });
      expect(Date.now() - started).toBeLessThan(5_000);
    }
    await healthy();
  });

  it('a 1 GiB allocation is killed at the memory limit', async () => {
    const before = process.memoryUsage().rss;
    const code =
      'async function tool() { const chunks = []; ' +
      'for (let i = 0; i < 1024; i++) chunks.push(new Array(1024 * 128).fill(i)); return chunks.length; }';
    expect(await run(code)).toEqual({
      status: 'error',
      detail: 'the tool ran out of memory: the 64 MB limit stopped it',
    });
    // The host did not take the gigabyte on itself.
    expect(process.memoryUsage().rss - before).toBeLessThan(512 * 1024 * 1024);
    await healthy();
  });

  it('the tool sees nothing of the host: no globals beyond the language and its capabilities', async () => {
    const result = await run(
      'async function tool() { return [typeof require, typeof process, typeof fetch, typeof Buffer, ' +
        'typeof setTimeout, typeof data.list, typeof send]; }',
    );
    expect(result).toEqual({
      status: 'ok',
      result: ['undefined', 'undefined', 'undefined', 'undefined', 'undefined', 'function', 'function'],
    });
  });
});

describe('capabilities as the tool sees them', () => {
  it('a failed capability call is an Error the tool can catch; browser is not available', async () => {
    const result = await run(
      'async function tool() { const out = []; ' +
        "for (const f of [() => integrations.call('crm', {}), () => browser('open x'), () => data.list('nope')]) " +
        '{ try { await f(); } catch (e) { out.push(e.message); } } return out; }',
    );
    expect(result).toEqual({
      status: 'ok',
      result: [
        'integration "crm" is not connected: configure it in KEEL_INTEGRATIONS',
        BROWSER_UNAVAILABLE,
        'no table "nope" in this app (its tables: leads)',
      ],
    });
  });

  it('a gated call stops the run, even when the tool would catch the failure', async () => {
    const result = await run(
      "async function tool() { try { await send('hello'); } catch { return 'carried on'; } return 'sent'; }",
    );
    expect(result).toEqual({
      status: 'needs_approval',
      gate: { capability: 'send', detail: 'send "hello" to nowhere (no delivery is set)' },
      seq: 0,
    });
  });

  it("a failure of the host itself is not the tool's to catch: the run throws, for Temporal to retry", async () => {
    const host: CapabilityHost = async (capability) => {
      if (capability === 'data.list') throw new Error('connection terminated');
      throw new CapabilityError('unexpected');
    };
    await expect(
      run("async function tool() { try { await data.list('leads'); } catch { return 'swallowed'; } }", host),
    ).rejects.toThrow('connection terminated');
  });

  it("what PostgreSQL cannot store is scrubbed from a tool's result, even with JSON replaced by the tool", async () => {
    expect(
      await run("async function tool() { JSON.stringify = () => 'garbage'; return { a: 'x\\u0000y', b: '\\ud800' }; }"),
    ).toEqual({ status: 'ok', result: { a: 'xy', b: '\ufffd' } });
    expect(
      await run("async function tool() { JSON.stringify = () => '{'; return (await data.list('leads')).length; }"),
    ).toEqual({ status: 'ok', result: 1 });
  });

  it('the tool gets its arguments and its result comes back as JSON', async () => {
    expect(
      await run(
        'async function tool({ input, other }) { return { input, other, n: 1 }; }',
        simulatedCapabilities(tables),
        { input: 'hi', other: '' },
      ),
    ).toEqual({
      status: 'ok',
      result: { input: 'hi', other: '', n: 1 },
    });
  });
});
