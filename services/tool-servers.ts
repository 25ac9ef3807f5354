import {
  openToolServer,
  ToolServerError,
  type ToolServerEndpoint,
  type ToolServerFailure,
  type ToolServerSession,
} from '../adapters/mcp/client';
import type { ToolSessionPool } from '../adapters/mcp/sessions';
import { createEgressGuard, type EgressGuard } from '../adapters/egress';
import { recordAudit } from '../db/audit';
import type { Pool } from '../db/pool';
import * as db from '../db/tool-servers';
import { staticEgressCheck, type EgressAllow } from '../domain/egress';
import {
  commandAllowed,
  DEFAULT_TOOL_COMMANDS,
  serverTools,
  unknownPolicyTools,
  type ListedTool,
  type ServerTool,
  type ToolCommands,
  type ToolPolicy,
} from '../domain/tool-servers';
import { secretBoxOf, secretFingerprint, SecretsUnavailableError, type SecretBox } from './secrets';

/**
 * Tool servers as a person configures them (the API) and as a worker reaches them (the tool call steps): a PUT is
 * stored only once Keel has connected, initialised and listed the server's tools; secrets are sealed at rest and only
 * their fingerprints are shown.
 */
export interface ToolServerDeps {
  pool: Pool;
  secrets: SecretBox;
  egress: EgressGuard;
  /** A worker's live sessions; the API connects once per request instead. */
  sessions?: ToolSessionPool;
  /** The commands a stdio server may run (KEEL_TOOL_COMMANDS); checked when a person configures one. */
  commands?: ToolCommands;
}

/** How long connecting, initialising and listing may take. */
const CONNECT_TIMEOUT_MS = 15_000;

export type ToolServerSpec = (
  | { transport: 'http'; url: string; headers: Record<string, string> }
  | { transport: 'stdio'; command: string; args: string[]; env: Record<string, string> }
) & { policies: Record<string, ToolPolicy>; defaultPolicy: ToolPolicy | null; enabled: boolean };

/** A server as people see it: its tools with their policies, its secrets as fingerprints. */
export interface ToolServerView extends Omit<db.ToolServerRow, 'sealedSecrets' | 'tools' | 'version'> {
  tools: ServerTool[];
}

/** Why a server was not stored: each names its cause (services' callers turn it into a 4xx). */
export class ToolServerRefusal extends Error {
  constructor(
    readonly reason: ToolServerFailure | 'unknown_tool' | 'secrets_unavailable' | 'command_not_allowed',
    message: string,
  ) {
    super(message);
    this.name = 'ToolServerRefusal';
  }
}

export function viewOf(row: db.ToolServerRow): ToolServerView {
  const { sealedSecrets: _sealed, version: _version, tools, ...rest } = row;
  return { ...rest, tools: serverTools(row.name, tools, row) };
}

/**
 * Connects, initialises and lists, then stores the server (replacing one of that name). Nothing is stored when any
 * step fails: a refused address, an unreachable host, an answer that is not MCP, refused credentials.
 */
export async function putToolServer(
  deps: ToolServerDeps,
  agentId: string,
  name: string,
  spec: ToolServerSpec,
  actor: string,
): Promise<{ server: ToolServerView; created: boolean }> {
  const endpoint: ToolServerEndpoint =
    spec.transport === 'http'
      ? { transport: 'http', url: spec.url, headers: spec.headers }
      : { transport: 'stdio', command: spec.command, args: spec.args, env: spec.env };
  if (endpoint.transport === 'http') {
    const refusal = staticEgressCheck(endpoint.url, deps.egress.allow);
    if (refusal) throw new ToolServerRefusal('egress_refused', `url: ${refusal.message}`);
  } else {
    const allowed = deps.commands ?? DEFAULT_TOOL_COMMANDS;
    if (!commandAllowed(endpoint.command, allowed))
      throw new ToolServerRefusal(
        'command_not_allowed',
        `command: "${endpoint.command}" is not among the commands a stdio tool server may run ` +
          `(KEEL_TOOL_COMMANDS: ${allowed === '*' ? '*' : allowed.join(', ') || 'none'})`,
      );
  }
  const tools = await listOnce(deps, endpoint);
  const unknown = unknownPolicyTools(tools, spec);
  if (unknown.length > 0)
    throw new ToolServerRefusal(
      'unknown_tool',
      `policies name ${unknown.map((n) => `"${n}"`).join(', ')}, which the server does not list ` +
        `(it lists ${tools.map((t) => t.name).join(', ') || 'no tools'})`,
    );
  const secrets =
    endpoint.transport === 'http' ? { headers: endpoint.headers, env: {} } : { headers: {}, env: endpoint.env };
  const { row, created } = await db.putToolServer(deps.pool, {
    agentId,
    name,
    transport: endpoint.transport,
    url: endpoint.transport === 'http' ? endpoint.url : null,
    command: endpoint.transport === 'stdio' ? endpoint.command : null,
    args: endpoint.transport === 'stdio' ? endpoint.args : [],
    sealedSecrets: sealed(deps.secrets, secrets),
    fingerprints: { headers: fingerprints(secrets.headers), env: fingerprints(secrets.env) },
    policies: spec.policies,
    defaultPolicy: spec.defaultPolicy,
    enabled: spec.enabled,
    tools,
  });
  await recordAudit(deps.pool, {
    agentId,
    action: created ? 'tool_server.create' : 'tool_server.replace',
    actor,
    subject: name,
    detail: { transport: row.transport, tools: tools.length },
  });
  return { server: viewOf(row), created };
}

export async function toolServer(pool: Pool, agentId: string, name: string): Promise<ToolServerView | undefined> {
  const row = await db.getToolServer(pool, agentId, name);
  return row && viewOf(row);
}

export async function toolServers(pool: Pool, agentId: string): Promise<ToolServerView[]> {
  return (await db.listToolServers(pool, agentId)).map(viewOf);
}

export async function removeToolServer(pool: Pool, agentId: string, name: string, actor: string): Promise<boolean> {
  const removed = await db.deleteToolServer(pool, agentId, name);
  if (removed) await recordAudit(pool, { agentId, action: 'tool_server.delete', actor, subject: name });
  return removed;
}

/** A person's change of policies or of whether the server is on; tools named must be ones the server lists. */
export async function changeToolServerPolicies(
  pool: Pool,
  change: {
    agentId: string;
    name: string;
    policies?: Record<string, ToolPolicy>;
    defaultPolicy?: ToolPolicy | null;
    enabled?: boolean;
  },
  actor: string,
): Promise<ToolServerView | undefined> {
  const current = await db.getToolServer(pool, change.agentId, change.name);
  if (!current) return undefined;
  const unknown = unknownPolicyTools(current.tools, { policies: change.policies ?? {}, defaultPolicy: null });
  if (unknown.length > 0)
    throw new ToolServerRefusal(
      'unknown_tool',
      `policies name ${unknown.map((n) => `"${n}"`).join(', ')}, which the server does not list`,
    );
  const row = await db.updateToolServerPolicies(pool, change);
  if (!row) return undefined;
  const { agentId, name, ...detail } = change;
  await recordAudit(pool, { agentId, action: 'tool_server.policies', actor, subject: name, detail });
  return viewOf(row);
}

/** Lists the server's tools again (a person asked, or the server said they changed). */
export async function refreshToolServer(
  deps: ToolServerDeps,
  agentId: string,
  name: string,
): Promise<ToolServerView | undefined> {
  const row = await db.getToolServer(deps.pool, agentId, name);
  if (!row) return undefined;
  const tools = await listOnce(deps, endpointOf(deps.secrets, row));
  return viewOf((await db.setToolServerTools(deps.pool, { agentId, name, version: row.version, tools })) ?? row);
}

/** How to reach a stored server, its secrets opened: only where the server is reached, never into a payload. */
export function endpointOf(secrets: SecretBox, row: db.ToolServerRow): ToolServerEndpoint {
  const opened = row.sealedSecrets
    ? (JSON.parse(secrets.open(row.sealedSecrets)) as { headers: Record<string, string>; env: Record<string, string> })
    : { headers: {}, env: {} };
  return row.transport === 'http'
    ? { transport: 'http', url: row.url!, headers: opened.headers }
    : { transport: 'stdio', command: row.command!, args: row.args, env: opened.env };
}

/**
 * Runs `work` on a live session with the server: the worker's pooled one (opened again when lost), keyed by the
 * server's configuration version so that a replaced server is never reached with its old settings.
 */
export async function withToolServer<T>(
  deps: ToolServerDeps,
  row: db.ToolServerRow,
  work: (s: ToolServerSession) => Promise<T>,
): Promise<T> {
  const open = () =>
    openToolServer(endpointOf(deps.secrets, row), {
      fetch: deps.egress.fetch,
      timeoutMs: CONNECT_TIMEOUT_MS,
      // The server said its tools changed: the next turn is offered the new list.
      onToolsChanged: () => void refreshToolServer(deps, row.agentId, row.name).catch(() => undefined),
    });
  if (!deps.sessions) {
    const session = await open();
    try {
      return await work(session);
    } finally {
      await session.close();
    }
  }
  const lost = (err: unknown) => err instanceof ToolServerError && err.failure !== 'timeout';
  return deps.sessions.use(`${row.agentId}/${row.name}/v${row.version}`, open, work, lost);
}

async function listOnce(deps: ToolServerDeps, endpoint: ToolServerEndpoint): Promise<ListedTool[]> {
  let session: ToolServerSession | undefined;
  try {
    session = await openToolServer(endpoint, { fetch: deps.egress.fetch, timeoutMs: CONNECT_TIMEOUT_MS });
    return await session.listTools();
  } catch (err) {
    if (err instanceof ToolServerError) throw new ToolServerRefusal(err.failure, err.message);
    throw err;
  } finally {
    await session?.close();
  }
}

function sealed(box: SecretBox, s: { headers: Record<string, string>; env: Record<string, string> }): string | null {
  if (Object.keys(s.headers).length + Object.keys(s.env).length === 0) return null;
  try {
    return box.seal(JSON.stringify(s));
  } catch (err) {
    if (err instanceof SecretsUnavailableError) throw new ToolServerRefusal('secrets_unavailable', err.message);
    throw err;
  }
}

const fingerprints = (values: Record<string, string>) =>
  Object.fromEntries(Object.entries(values).map(([k, v]) => [k, secretFingerprint(v)]));

/** What the API needs to reach tool servers: its own egress guard (KEEL_EGRESS_ALLOW) and the secrets' keys. */
export function apiToolServerDeps(
  pool: Pool,
  allow: EgressAllow,
  secretsKey: string | undefined,
  commands: ToolCommands | undefined,
): ToolServerDeps & { close(): Promise<void> } {
  const egress = createEgressGuard({ allow });
  return {
    pool,
    secrets: secretBoxOf(secretsKey),
    egress,
    ...(commands ? { commands } : {}),
    close: () => egress.close(),
  };
}
