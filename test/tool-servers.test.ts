import { createHash } from 'node:crypto';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestKeel, uniqueId, type ApiMethod, type TestKeel } from './support/keel';
import { startShopHttp, startWebPage, type ShopHttp } from './support/mcp-shop';

/**
 * Tool servers as a person configures them (issue 26, point 1): one PUT connects, initialises and lists the tools; a
 * server that cannot be reached, is not MCP, refuses the credentials or is at a refused address is not stored, and
 * the answer names why. Secrets go in and never come out.
 */
let keel: TestKeel;
let shop: ShopHttp;
let locked: ShopHttp;
const TOKEN = 'shop-token-5f2a9c1e7b3d4a60';
beforeAll(async () => {
  keel = await startTestKeel({ worker: false });
  shop = await startShopHttp();
  locked = await startShopHttp({ token: TOKEN });
});
afterAll(async () => {
  await keel?.stop();
  await shop?.close();
  await locked?.close();
});

type ErrorBody = { error: { code: string; message: string } };
interface Tool {
  name: string;
  modelName: string;
  description: string;
  inputSchema: Record<string, unknown>;
  annotations: Record<string, boolean | string>;
  policy: string;
}
interface Server {
  name: string;
  transport: string;
  url: string | null;
  headers: Record<string, { hasSecret: boolean; fingerprint: string }>;
  policies: Record<string, string>;
  enabled: boolean;
  tools: Tool[];
}

const call = <T>(method: ApiMethod, url: string, body?: unknown) => keel.call<T>(method, url, body);
const put = (agent: string, name: string, body: unknown) =>
  call<Server & ErrorBody>('PUT', `/v1/agents/${agent}/tool-servers/${name}`, body);

describe('a tool server, configured by a person', () => {
  it('one PUT connects, lists the tools with their model names and policies, and stores the server', async () => {
    const agent = uniqueId('tools');
    const created = await put(agent, 'shop', { url: shop.url });
    expect(created.status).toBe(201);
    const byName = new Map(created.body.tools.map((t) => [t.name, t]));
    expect(byName.get('lookup_order')).toMatchObject({
      modelName: 'shop__lookup_order',
      description: 'Look an order up by its id.',
      annotations: { readOnlyHint: true },
      policy: 'auto',
    });
    expect(byName.get('lookup_order')!.inputSchema).toMatchObject({ properties: { orderId: { type: 'string' } } });
    // Anything that may change the world waits for a person, unless a person says otherwise.
    expect(byName.get('refund')).toMatchObject({ modelName: 'shop__refund', policy: 'approve' });
    expect(byName.get('charge')!.policy).toBe('approve');

    const listed = await call<{ items: Server[] }>('GET', `/v1/agents/${agent}/tool-servers`);
    expect(listed.body.items.map((s) => s.name)).toEqual(['shop']);
    const one = await call<Server>('GET', `/v1/agents/${agent}/tool-servers/shop`);
    expect(one.body.tools.map((t) => t.name).sort()).toEqual([
      'big_report',
      'charge',
      'flaky_lookup',
      'leaky_lookup',
      'lookup_order',
      'out_of_stock',
      'refund',
      'slow_lookup',
    ]);

    // A person's policy wins over the annotations, and deny is a policy too.
    const patched = await call<Server>('PATCH', `/v1/agents/${agent}/tool-servers/shop`, {
      policies: { refund: 'auto', lookup_order: 'deny' },
    });
    expect(patched.status).toBe(200);
    const policy = (s: Server, n: string) => s.tools.find((t) => t.name === n)!.policy;
    expect([policy(patched.body, 'refund'), policy(patched.body, 'lookup_order')]).toEqual(['auto', 'deny']);
    const replaced = await put(agent, 'shop', { url: shop.url, defaultPolicy: 'approve' });
    expect(replaced.status).toBe(200);
    expect(policy(replaced.body, 'lookup_order')).toBe('approve');

    expect((await call('POST', `/v1/agents/${agent}/tool-servers/shop/refresh`)).status).toBe(200);
    expect((await call('DELETE', `/v1/agents/${agent}/tool-servers/shop`)).status).toBe(200);
    expect((await call<ErrorBody>('GET', `/v1/agents/${agent}/tool-servers/shop`)).status).toBe(404);
  });

  it('header values go in, reach the server, and come back only as a fingerprint', async () => {
    const agent = uniqueId('tools');
    const created = await put(agent, 'locked', { url: locked.url, headers: { authorization: `Bearer ${TOKEN}` } });
    expect(created.status).toBe(201);
    expect(locked.authorizations).toContain(`Bearer ${TOKEN}`);
    expect(Object.keys(created.body.headers)).toEqual(['authorization']);
    expect(created.body.headers.authorization!.hasSecret).toBe(true);
    // The first 8 hex characters of the value's SHA-256: which secret it is, never the secret.
    const sha = createHash('sha256').update(`Bearer ${TOKEN}`).digest('hex');
    expect(created.body.headers.authorization!.fingerprint).toBe(sha.slice(0, 8));
    expect(created.raw).not.toContain(TOKEN);
    for (const url of [`/v1/agents/${agent}/tool-servers`, `/v1/agents/${agent}/tool-servers/locked`]) {
      const got = await call('GET', url);
      expect(got.raw).not.toContain(TOKEN);
    }
    // At rest it is sealed, not stored as it came.
    const { rows } = await keel.pool.query<{ row: string }>(
      `SELECT t::text AS row FROM tool_servers t WHERE agent_id = $1`,
      [agent],
    );
    expect(rows[0]!.row).not.toContain(TOKEN);
  });
});

describe('bad input is refused with a 4xx naming the cause, and nothing is stored', () => {
  async function refused(body: unknown, name = 'srv') {
    const agent = uniqueId('tools');
    const res = await put(agent, name, body);
    const stored = await keel.pool.query(`SELECT 1 FROM tool_servers WHERE agent_id = $1`, [agent]);
    expect(stored.rowCount).toBe(0);
    return res;
  }

  it('an unreachable host', async () => {
    const res = await refused({ url: 'http://127.0.0.1:9/mcp' });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('tool_server_unreachable');
    expect(res.body.error.message).toContain('http://127.0.0.1:9/mcp could not be reached');
  });

  it('an answer that is not MCP', async () => {
    const page = await startWebPage();
    try {
      const res = await refused({ url: page.url });
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe('not_an_mcp_server');
      expect(res.body.error.message).toContain('did not answer as an MCP server');
    } finally {
      await page.close();
    }
  });

  it('a 401 from the server', async () => {
    const res = await refused({ url: locked.url, headers: { authorization: 'Bearer wrong' } });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('tool_server_unauthorized');
    expect(res.body.error.message).toContain('refused the credentials');
    expect(res.raw).not.toContain('Bearer wrong');
  });

  it('a refused address (cloud metadata), before anything is sent', async () => {
    const res = await refused({ url: 'http://169.254.169.254/mcp' });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('egress_refused');
    expect(res.body.error.message).toMatch(/^url: /);
  });

  it('a bad name', async () => {
    const res = await refused({ url: shop.url }, 'Shop_Server');
    expect(res.status).toBe(400);
    expect(res.body.error.message).toContain('1 to 32 lowercase letters, digits or hyphens');
  });

  it('credentials in the URL, which every answer shows back', async () => {
    const res = await refused({ url: shop.url.replace('http://', 'http://user:hunter2@') });
    expect(res.status).toBe(400);
    expect(res.body.error.message).toContain('put credentials in headers, not in the URL');
  });

  it('a policy for a tool the server does not list', async () => {
    const res = await refused({ url: shop.url, policies: { refnud: 'auto' } });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('unknown_tool');
    expect(res.body.error.message).toContain('"refnud"');
  });

  it('both a url and a command, or neither', async () => {
    const both = await refused({ url: shop.url, command: 'node' });
    expect(both.status).toBe(400);
    expect(both.body.error.message).toContain('exactly one of url (HTTP) or command (stdio)');
    expect((await refused({ policies: {} })).status).toBe(400);
  });

  it('a stdio command that is not among KEEL_TOOL_COMMANDS', async () => {
    const res = await refused({ command: 'sh', args: ['-c', 'echo hi'] });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('command_not_allowed');
    expect(res.body.error.message).toContain('"sh" is not among the commands a stdio tool server may run');
  });

  it('a stdio command that does not start an MCP server', async () => {
    const res = await refused({ command: process.execPath, args: ['-e', 'process.exit(3)'] });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toMatch(/^tool_server_(failed_to_start|unreachable)$/);
  });
});

describe('a stdio server, as most MCP servers ship', () => {
  it('the filesystem server from npm, run with npx as it ships, lists its tools', async () => {
    const agent = uniqueId('tools');
    const dir = path.resolve('test');
    const res = await put(agent, 'fs', {
      command: 'npx',
      args: ['--no-install', '@modelcontextprotocol/server-filesystem', dir],
    });
    expect(res.status, res.raw).toBe(201);
    const tools = new Map(res.body.tools.map((t) => [t.name, t.policy]));
    expect(tools.get('read_text_file')).toBe('auto');
    expect(tools.get('write_file')).toBe('approve');
  });
});
