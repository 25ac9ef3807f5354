import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { ErrorCode, McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { IDEMPOTENCY_META_KEY } from '../../domain/tool-calls';
import type { ListedTool, ToolAnnotations } from '../../domain/tool-servers';
import { egressFailureOf, type GuardedFetch } from '../egress';

/**
 * The MCP client behind a small interface: a session with one tool server, over streamable HTTP (through the egress
 * guard) or stdio (a process of the worker's), with the official SDK. Errors come out as ToolServerError, named by
 * what a person or the model needs to know: whether the server was reached, and whether a call was sent.
 */

/** How to reach a server, secrets included: built in an activity or a request handler, never in a payload. */
export type ToolServerEndpoint =
  | { transport: 'http'; url: string; headers: Record<string, string> }
  | { transport: 'stdio'; command: string; args: string[]; env: Record<string, string> };

export type ToolServerFailure =
  'unreachable' | 'not_mcp' | 'unauthorized' | 'egress_refused' | 'failed_to_start' | 'timeout' | 'closed';

export class ToolServerError extends Error {
  constructor(
    readonly failure: ToolServerFailure,
    message: string,
    /** Whether a call had been sent when it failed: its outcome is then unknown. */
    readonly sent = false,
  ) {
    super(message);
    this.name = 'ToolServerError';
  }
}

export interface ToolCallAnswer {
  text: string;
  isError: boolean;
}

export interface ToolServerSession {
  listTools(): Promise<ListedTool[]>;
  callTool(
    name: string,
    args: Record<string, unknown>,
    opts: { idempotencyKey: string; timeoutMs: number; signal?: AbortSignal },
  ): Promise<ToolCallAnswer>;
  /** Set once the connection is gone (the process exited, the session was closed): the session is not used again. */
  readonly closed: boolean;
  close(): Promise<void>;
}

export interface OpenOptions {
  /** The egress guard's fetch, for HTTP servers. */
  fetch: GuardedFetch;
  /** How long connecting and listing may take. */
  timeoutMs: number;
  /** The server said its tools changed (notifications/tools/list_changed). */
  onToolsChanged?: () => void;
}

const CLIENT_INFO = { name: 'keel', version: '0.1.0' };

export async function openToolServer(endpoint: ToolServerEndpoint, opts: OpenOptions): Promise<ToolServerSession> {
  const client = new Client(CLIENT_INFO, {
    ...(opts.onToolsChanged
      ? { listChanged: { tools: { autoRefresh: false, onChanged: () => opts.onToolsChanged?.() } } }
      : {}),
  });
  let closed = false;
  // Calls in flight. The SDK reports a response stream that dropped mid-call to onerror and lets the call wait out
  // its timeout; a dropped stream means the answer is lost, so those calls fail now, as sent.
  const inFlight = new Set<(err: ToolServerError) => void>();
  const dropAll = (message: string) => {
    closed = true;
    for (const fail of inFlight) fail(new ToolServerError('closed', message, true));
    inFlight.clear();
  };
  client.onclose = () => dropAll('the connection closed before the server answered');
  client.onerror = (err) => {
    if (err.message.startsWith('SSE stream disconnected')) dropAll('the connection dropped before the server answered');
  };
  const transport =
    endpoint.transport === 'http'
      ? new StreamableHTTPClientTransport(new URL(endpoint.url), {
          fetch: opts.fetch,
          requestInit: { headers: endpoint.headers },
        })
      : new StdioClientTransport({
          command: endpoint.command,
          args: endpoint.args,
          env: { ...getDefaultEnvironment(), ...endpoint.env },
          // The server's own log is not Keel's to print: it may echo its secrets.
          stderr: 'ignore',
        });
  try {
    await client.connect(transport, { timeout: opts.timeoutMs });
  } catch (err) {
    await client.close().catch(() => undefined);
    throw connectFailure(endpoint, err);
  }
  return {
    get closed() {
      return closed;
    },
    async listTools() {
      const tools: ListedTool[] = [];
      let cursor: string | undefined;
      do {
        const page = await client
          .listTools(cursor ? { cursor } : {}, { timeout: opts.timeoutMs })
          .catch((err: unknown) => Promise.reject(connectFailure(endpoint, err)));
        for (const t of page.tools)
          tools.push({
            name: t.name,
            description: t.description ?? '',
            inputSchema: t.inputSchema,
            annotations: annotationsOf(t.annotations),
          });
        cursor = page.nextCursor;
      } while (cursor);
      return tools;
    },
    async callTool(name, args, { idempotencyKey, timeoutMs, signal }) {
      let fail: ((err: ToolServerError) => void) | undefined;
      const dropped = new Promise<never>((_, reject) => {
        fail = reject;
        inFlight.add(reject);
      });
      try {
        const result = (await Promise.race([
          client.callTool({ name, arguments: args, _meta: { [IDEMPOTENCY_META_KEY]: idempotencyKey } }, undefined, {
            timeout: timeoutMs,
            ...(signal ? { signal } : {}),
          }),
          dropped,
        ])) as CallToolResult;
        return { text: resultText(result), isError: result.isError === true };
      } catch (err) {
        throw callFailure(err);
      } finally {
        inFlight.delete(fail!);
      }
    },
    async close() {
      closed = true;
      await client.close().catch(() => undefined);
    },
  };
}

function annotationsOf(a: Record<string, unknown> | undefined): ToolAnnotations {
  const out: ToolAnnotations = {};
  if (!a) return out;
  if (typeof a.title === 'string') out.title = a.title;
  for (const k of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'] as const)
    if (typeof a[k] === 'boolean') out[k] = a[k];
  return out;
}

/** A result as text: text blocks as they are, anything else named, structured content as JSON when nothing else. */
function resultText(r: CallToolResult): string {
  const parts = (r.content ?? []).map((b) => {
    switch (b.type) {
      case 'text':
        return b.text;
      case 'resource':
        return 'text' in b.resource ? b.resource.text : `[resource ${b.resource.uri}]`;
      case 'resource_link':
        return `[resource link ${b.uri}]`;
      default:
        return `[${b.type} ${'mimeType' in b ? String(b.mimeType) : ''}]`.replace(' ]', ']');
    }
  });
  if (parts.length === 0 && r.structuredContent) return JSON.stringify(r.structuredContent);
  return parts.join('\n');
}

const where = (e: ToolServerEndpoint) => (e.transport === 'http' ? e.url : `the command ${e.command}`);

/** Why connecting, initialising or listing failed, in the words a person configuring the server reads. */
function connectFailure(endpoint: ToolServerEndpoint, err: unknown): ToolServerError {
  if (err instanceof ToolServerError) return err;
  const egress = egressFailureOf(err);
  if (egress) return new ToolServerError('egress_refused', egress.message);
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof UnauthorizedError || (err instanceof StreamableHTTPError && [401, 403].includes(err.code ?? 0)))
    return new ToolServerError('unauthorized', `${where(endpoint)} refused the credentials: ${message.slice(0, 200)}`);
  if (err instanceof StreamableHTTPError)
    return new ToolServerError(
      'not_mcp',
      `${where(endpoint)} did not answer as an MCP server: ${message.slice(0, 200)}`,
    );
  if (err instanceof McpError && err.code === (ErrorCode.RequestTimeout as number))
    return new ToolServerError('timeout', `${where(endpoint)} did not answer in time`);
  if (endpoint.transport === 'stdio' && (err instanceof McpError || isSpawnError(err)))
    return new ToolServerError('failed_to_start', `${where(endpoint)} did not start as an MCP server: ${message}`);
  if (err instanceof McpError || err instanceof SyntaxError || isSchemaError(err))
    return new ToolServerError(
      'not_mcp',
      `${where(endpoint)} did not answer as an MCP server: ${message.slice(0, 200)}`,
    );
  return new ToolServerError('unreachable', `${where(endpoint)} could not be reached: ${causeOf(err)}`);
}

/** A call's failure; `sent`: the request had left, so the server may have acted on it. */
function callFailure(err: unknown): ToolServerError {
  if (err instanceof ToolServerError) return err;
  const egress = egressFailureOf(err);
  if (egress) return new ToolServerError('egress_refused', egress.message);
  // Refused before the server acted: credentials no longer accepted, or a session the server no longer knows (it
  // restarted); a new session may send the call again.
  if (err instanceof UnauthorizedError || (err instanceof StreamableHTTPError && [401, 403].includes(err.code ?? 0)))
    return new ToolServerError('unauthorized', `the server refused the credentials: ${err.message.slice(0, 200)}`);
  if (err instanceof StreamableHTTPError && [400, 404].includes(err.code ?? 0))
    return new ToolServerError('closed', `the server no longer knows this session (${err.code})`);
  if (err instanceof McpError && err.code === (ErrorCode.RequestTimeout as number))
    return new ToolServerError('timeout', 'the server did not answer in time', true);
  if (err instanceof McpError && err.code === (ErrorCode.ConnectionClosed as number))
    return new ToolServerError('closed', 'the connection closed before the server answered', true);
  if (err instanceof McpError)
    return new ToolServerError('not_mcp', `the server answered with an error: ${err.message}`, true);
  if (notConnected(err)) return new ToolServerError('unreachable', `the server could not be reached: ${causeOf(err)}`);
  if (err instanceof Error && err.name === 'AbortError')
    return new ToolServerError('closed', 'the call was abandoned before the server answered', true);
  return new ToolServerError('closed', `the call failed after it was sent: ${causeOf(err)}`, true);
}

/** Refused or unresolved before anything was sent: the call never left. */
function notConnected(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++)
    if ('code' in e && ['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN'].includes(String(e.code))) return true;
  return false;
}

function isSpawnError(err: unknown): boolean {
  return err instanceof Error && 'code' in err && ['ENOENT', 'EACCES'].includes(String(err.code));
}

function isSchemaError(err: unknown): boolean {
  return err instanceof Error && (err.name === 'ZodError' || err.name === '$ZodError');
}

/** The innermost cause's message (fetch's "fetch failed" hides ECONNREFUSED). */
function causeOf(err: unknown): string {
  let e: unknown = err;
  for (let depth = 0; e instanceof Error && e.cause instanceof Error && depth < 8; depth++) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}
