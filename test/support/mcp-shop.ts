import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';
import { FAKE_SECRET } from '../../domain/scripted-model';
import { IDEMPOTENCY_META_KEY } from '../../domain/tool-calls';

/**
 * A shop as an MCP server, built with the official SDK's McpServer: what the tool tests call. Every call it receives
 * is recorded with its idempotency key, so a test can count how often a call reached the server.
 */
export interface ReceivedCall {
  tool: string;
  args: Record<string, unknown>;
  idempotencyKey: string | undefined;
}

/** 300 KB of text: a result that must not land in a workflow's history whole. */
export const BIG_REPORT = Array.from({ length: 3_000 }, (_, i) => `line ${i}: ${'x'.repeat(92)}`).join('\n');

export interface ShopOptions {
  /** Called when a call must lose its answer (`charge`, `flaky_lookup`'s first): the server drops its connections. */
  onCharge?: () => void;
  /** Tools added since the shop started (addTool): every session has them. */
  extraTools?: readonly string[];
}

export function shopServer(calls: ReceivedCall[], opts: ShopOptions = {}): McpServer {
  const server = new McpServer({ name: 'shop', version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } });
  const received = (tool: string, args: Record<string, unknown>, meta: Record<string, unknown> | undefined) => {
    const key = meta?.[IDEMPOTENCY_META_KEY];
    calls.push({ tool, args, idempotencyKey: typeof key === 'string' ? key : undefined });
  };
  const text = (t: string) => ({ content: [{ type: 'text' as const, text: t }] });
  server.registerTool(
    'lookup_order',
    {
      description: 'Look an order up by its id.',
      inputSchema: { orderId: z.string() },
      annotations: { readOnlyHint: true },
    },
    (args, extra) => {
      received('lookup_order', args, extra._meta);
      return text(`order ${args.orderId}: shipped`);
    },
  );
  server.registerTool(
    'refund',
    {
      description: 'Refund an order.',
      inputSchema: { orderId: z.string(), amount: z.number() },
      annotations: { destructiveHint: true },
    },
    (args, extra) => {
      received('refund', args, extra._meta);
      return text(`refunded ${args.amount} on order ${args.orderId}`);
    },
  );
  server.registerTool(
    'charge',
    {
      description: 'Charge a card once more (never safe to repeat).',
      inputSchema: { orderId: z.string() },
      annotations: { readOnlyHint: false, idempotentHint: false },
    },
    async (args, extra) => {
      received('charge', args, extra._meta);
      opts.onCharge?.();
      // The connection is gone before an answer could be sent.
      return new Promise<never>(() => undefined);
    },
  );
  server.registerTool(
    'flaky_lookup',
    {
      description: 'Looks an order up; the connection drops the first time an order is asked for.',
      inputSchema: { orderId: z.string() },
      annotations: { readOnlyHint: true },
    },
    async (args, extra) => {
      received('flaky_lookup', args, extra._meta);
      if (calls.filter((c) => c.tool === 'flaky_lookup' && c.args.orderId === args.orderId).length === 1) {
        opts.onCharge?.();
        return new Promise<never>(() => undefined);
      }
      return text(`order ${args.orderId}: found on try ${calls.filter((c) => c.tool === 'flaky_lookup').length}`);
    },
  );
  server.registerTool(
    'slow_lookup',
    {
      description: 'Looks an order up, taking `ms` to answer.',
      inputSchema: { orderId: z.string(), ms: z.number() },
      annotations: { readOnlyHint: true },
    },
    async (args, extra) => {
      received('slow_lookup', args, extra._meta);
      await new Promise((resolve) => setTimeout(resolve, args.ms));
      return text(`order ${args.orderId}: shipped`);
    },
  );
  server.registerTool(
    'big_report',
    { description: 'A long report.', inputSchema: {}, annotations: { readOnlyHint: true } },
    (_args, extra) => {
      received('big_report', {}, extra._meta);
      return text(BIG_REPORT);
    },
  );
  server.registerTool(
    'leaky_lookup',
    {
      description: 'Looks something up; its answer holds a key.',
      inputSchema: {},
      annotations: { readOnlyHint: true },
    },
    (_args, extra) => {
      received('leaky_lookup', {}, extra._meta);
      return text(`the config says api key ${FAKE_SECRET} for the shop`);
    },
  );
  server.registerTool(
    'out_of_stock',
    { description: 'Always fails.', inputSchema: {}, annotations: { readOnlyHint: true } },
    (_args, extra) => {
      received('out_of_stock', {}, extra._meta);
      return { content: [{ type: 'text' as const, text: 'the item is out of stock' }], isError: true };
    },
  );
  for (const name of opts.extraTools ?? []) addEchoTool(server, name);
  return server;
}

/** A read-only tool that answers its own name; registering it on a live server tells the client the list changed. */
function addEchoTool(server: McpServer, name: string): void {
  server.registerTool(
    name,
    { description: `The ${name} tool.`, inputSchema: {}, annotations: { readOnlyHint: true } },
    () => ({
      content: [{ type: 'text' as const, text: name }],
    }),
  );
}

export interface ShopHttp {
  url: string;
  calls: ReceivedCall[];
  /** Header values each request carried (a test checks the credentials arrived). */
  authorizations: string[];
  /** Adds a tool to every session, live and to come: live ones send notifications/tools/list_changed. */
  addTool(name: string): void;
  close(): Promise<void>;
}

/** The shop over MCP's streamable HTTP transport (stateful sessions), on a loopback port. */
export async function startShopHttp(opts: { token?: string } = {}): Promise<ShopHttp> {
  const calls: ReceivedCall[] = [];
  const authorizations: string[] = [];
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const servers: McpServer[] = [];
  const extraTools: string[] = [];
  const httpServer: http.Server = http.createServer((req, res) => {
    authorizations.push(req.headers.authorization ?? '');
    if (opts.token && req.headers.authorization !== `Bearer ${opts.token}`) {
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"unauthorized"}');
      return;
    }
    const sid = req.headers['mcp-session-id'];
    let transport = typeof sid === 'string' ? transports.get(sid) : undefined;
    if (!transport) {
      const created = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => void transports.set(id, created),
      });
      transport = created;
      const server = shopServer(calls, {
        onCharge: () => setImmediate(() => httpServer.closeAllConnections()),
        extraTools,
      });
      servers.push(server);
      void server.connect(created);
    }
    void transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => httpServer.listen(0, '127.0.0.1', resolve));
  const { port } = httpServer.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    calls,
    authorizations,
    addTool(name) {
      extraTools.push(name);
      for (const s of servers) if (s.isConnected()) addEchoTool(s, name);
    },
    async close() {
      for (const t of transports.values()) await t.close().catch(() => undefined);
      httpServer.closeAllConnections();
      await new Promise<void>((resolve) => httpServer.close(() => resolve()));
    },
  };
}

/** An HTTP server that is not MCP: it answers every request with a web page. */
export async function startWebPage(): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' }).end('<html><body>hello</body></html>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
