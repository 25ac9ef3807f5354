import { copyFile, mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { executable } from '../scripts/go-tools';
import { freePort } from '../scripts/ports';
import { spawnTs } from '../scripts/processes';
import { ensureTemporalCli, TEMPORAL_CLI_VERSION } from '../scripts/temporal-cli';

/**
 * Issue 50, reproduction 6: on a machine with Node alone, Keel gets the Temporal CLI the way the TypeScript SDK's
 * tests do (its cached download), then with Go, then says every way. Go, `temporal` and Keel's cache are hidden.
 * The SDK goes to temporal.download through a proxy of the test's own (HTTPS_PROXY, which its HTTP client honours):
 * the proxy sees the attempt, and refuses it, so the download fails the same way with or without internet access.
 */

/** A forward proxy that records where each CONNECT goes: `refuse` answers 403, `silent` never answers. */
async function startProxy(mode: 'refuse' | 'silent'): Promise<{
  url: string;
  connects: string[];
  /** Resolves when the side that asked has closed every tunnel it asked for. */
  allClosed(): Promise<void>;
  close(): Promise<void>;
}> {
  const connects: string[] = [];
  const sockets: Promise<void>[] = [];
  const tunnels: Socket[] = [];
  const server: Server = createServer();
  server.on('connect', (req, socket: Socket) => {
    connects.push(req.url ?? '');
    tunnels.push(socket);
    // The asking side's end of the tunnel (an HTTP server's sockets are half-open: 'end' comes, 'close' may not).
    sockets.push(new Promise((resolve) => socket.once('end', () => resolve()).once('close', () => resolve())));
    socket.resume();
    if (mode === 'refuse') socket.end('HTTP/1.1 403 Forbidden\r\n\r\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connects,
    allClosed: async () => void (await Promise.all(sockets)),
    close: () => {
      // A tunnel is the proxy's own socket, no longer the HTTP server's: it ends only when closed here.
      for (const socket of tunnels) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** How sdk-core's ephemeral_server names this machine to temporal.download. */
const ARCH = process.arch === 'x64' ? 'amd64' : 'arm64';
const PLATFORM = process.platform === 'darwin' ? 'darwin' : 'linux';

/** PATH without any folder that holds `go` or `temporal`. */
const hiddenPath = (process.env.PATH ?? '')
  .split(path.delimiter)
  .filter((dir) => dir && !executable(path.join(dir, 'go')) && !executable(path.join(dir, 'temporal')))
  .join(path.delimiter);

const hidden = (cacheHome: string, proxy: string): Record<string, string> => ({
  PATH: hiddenPath,
  XDG_CACHE_HOME: cacheHome,
  TEMPORAL_CLI_PATH: '',
  HTTPS_PROXY: proxy,
  https_proxy: proxy,
  ALL_PROXY: '',
  all_proxy: '',
  // Only temporal.download goes through the proxy, not the loopback gRPC of a Temporal that answers or not.
  NO_PROXY: '127.0.0.1,localhost',
  no_proxy: '127.0.0.1,localhost',
});

function runScript(
  entry: string,
  env: Record<string, string>,
): Promise<{ code: number | null; out: string; err: string }> {
  const child = spawnTs(entry, { ...process.env, ...env }, ['ignore', 'pipe', 'pipe']);
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, out, err })));
}

let cacheHome: string;
beforeAll(async () => {
  cacheHome = await mkdtemp(path.join(os.tmpdir(), 'keel-cli-cache-'));
});
afterAll(() => rm(cacheHome, { recursive: true, force: true }));
afterEach(() => {
  vi.unstubAllEnvs();
});

describe('the Temporal CLI, with Go and the cache hidden', () => {
  it.each([
    ['npm start', 'scripts/start.ts'],
    ['npm run provision (CI)', 'scripts/provision-cli.ts'],
  ])('%s tries the SDK download first, then Go, then names every way', async (_what, entry) => {
    const home = await mkdtemp(path.join(cacheHome, 'run-'));
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'keel-cli-data-'));
    const proxy = await startProxy('refuse');
    const dir = path.join(home, 'keel', 'temporal-cli', `v${TEMPORAL_CLI_VERSION}`);
    try {
      const { code, out, err } = await runScript(entry, {
        ...hidden(home, proxy.url),
        // npm start: no Temporal answers there, so it starts a dev server of its own, which needs the CLI.
        TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`,
        KEEL_DATA_DIR: dataDir,
      });
      expect(code).toBe(1);
      // The SDK went for v1.5.1 at temporal.download, once.
      expect(proxy.connects).toEqual(['temporal.download:443']);
      const lines = err.split('\n');
      const attempt = lines.indexOf(
        `keel: no Temporal CLI (TEMPORAL_CLI_PATH, PATH, ${dir}/temporal); downloading v1.5.1 with the Temporal SDK ` +
          `into ${dir}…`,
      );
      const message = lines.findIndex((l) =>
        l.endsWith('Keel found no Temporal CLI and could not get one. It tried, in this order:'),
      );
      expect(attempt).toBeGreaterThanOrEqual(0);
      expect(message).toBeGreaterThan(attempt);
      expect(lines.slice(message + 1, message + 8)).toEqual([
        `  1. TEMPORAL_CLI_PATH (not set), \`temporal\` on PATH (none) and Keel's cache (no ${dir}/temporal)`,
        "  2. the Temporal SDK's download of v1.5.1: error sending request for url " +
          `(https://temporal.download/cli/v1.5.1?arch=${ARCH}&platform=${PLATFORM}&format=tar.gz): ` +
          'client error (Connect): tunnel error: unsuccessful',
        '  3. a build with Go: Go is not installed (`go` is not on PATH)',
        'Any one of these makes it work:',
        '  - internet access to temporal.download (HTTPS_PROXY is honoured): the SDK downloads the CLI in seconds',
        '  - the Temporal CLI (https://docs.temporal.io/cli#install), with `temporal` on PATH or TEMPORAL_CLI_PATH set',
        '  - Go ≥ 1.25 (https://go.dev/dl/): Keel builds the CLI v1.5.1 itself (a few minutes, once)',
      ]);
      if (entry === 'scripts/start.ts') expect(lines[message]).toMatch(/^keel: start failed: Keel found no/);
      // Nothing printed as a path, nothing half-downloaded left in the cache.
      if (entry === 'scripts/provision-cli.ts') expect(out).toBe('');
      expect(await readdir(dir)).toEqual([]);
    } finally {
      await proxy.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });

  it('a temporal.download that never answers is given up on after its limit, and the download is killed', async () => {
    const home = await mkdtemp(path.join(cacheHome, 'silent-'));
    const proxy = await startProxy('silent');
    try {
      for (const [k, v] of Object.entries(hidden(home, proxy.url))) vi.stubEnv(k, v);
      const lines: string[] = [];
      await expect(
        ensureTemporalCli({ log: (l) => lines.push(l), limits: { reachMs: 5_000, totalMs: 60_000 } }),
      ).rejects.toThrow("  2. the Temporal SDK's download of v1.5.1: temporal.download did not answer within 5 s\n");
      expect(lines).toHaveLength(1);
      expect(proxy.connects).toEqual(['temporal.download:443']);
      // The SDK's connection ends with its process: nothing keeps waiting behind Keel's back.
      await proxy.allClosed();
      expect(await readdir(path.join(home, 'keel', 'temporal-cli', `v${TEMPORAL_CLI_VERSION}`))).toEqual([]);
    } finally {
      await proxy.close();
    }
  });

  it("the SDK's cached download is started by the SDK, moved into Keel's cache, found there next time", async () => {
    // What the SDK keeps in its download folder (a download that was not moved yet): the CLI this run already has.
    const real = await ensureTemporalCli();
    const home = await mkdtemp(path.join(cacheHome, 'cached-'));
    const dir = path.join(home, 'keel', 'temporal-cli', `v${TEMPORAL_CLI_VERSION}`);
    await mkdir(dir, { recursive: true });
    await copyFile(real.path, path.join(dir, `temporal-v${TEMPORAL_CLI_VERSION}`));
    const proxy = await startProxy('refuse');
    try {
      for (const [k, v] of Object.entries(hidden(home, proxy.url))) vi.stubEnv(k, v);
      const lines: string[] = [];
      const got = await ensureTemporalCli({ log: (l) => lines.push(l) });
      expect(got).toEqual({ path: path.join(dir, 'temporal'), how: 'downloaded' });
      expect(lines.at(-1)).toBe(`keel: the Temporal CLI v1.5.1 ready at ${dir}/temporal`);
      expect(proxy.connects).toEqual([]); // the SDK had it: no request
      expect(await readdir(dir)).toEqual(['temporal']);
      expect(await ensureTemporalCli({ log: (l) => lines.push(l) })).toEqual({
        path: path.join(dir, 'temporal'),
        how: 'cache',
      });
    } finally {
      await proxy.close();
    }
  });
});
