import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { storableString } from '../../domain/text';
import { TOOL_POLICIES, TOOL_SERVER_NAME, TOOL_SERVER_NAME_RULE } from '../../domain/tool-servers';
import {
  changeToolServerPolicies,
  putToolServer,
  refreshToolServer,
  removeToolServer,
  toolServer,
  toolServers,
  ToolServerRefusal,
  type ToolServerDeps,
  type ToolServerView,
} from '../../services/tool-servers';
import { ApiError, notFound } from '../errors';
import { AgentParams, ErrorResponse, Id } from '../schemas';

const ServerName = z.string().regex(TOOL_SERVER_NAME, TOOL_SERVER_NAME_RULE);
const ToolServerParams = z.object({ agentId: Id, name: ServerName });
const Policy = z.enum(TOOL_POLICIES as ['auto', 'approve', 'deny']);
const Policies = z
  .record(z.string().min(1).max(128), Policy)
  .refine((p) => Object.keys(p).length <= 500, 'at most 500 policies')
  .describe('A policy per tool, by the name its server lists it under');
const HeaderName = z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/, 'an HTTP header name');
const EnvName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'an environment variable name');
const SecretValue = storableString().max(8_192);

const ToolServerBody = z
  .object({
    url: z
      .url({ protocol: /^https?$/, error: 'an http(s) URL' })
      .max(2_048)
      // A URL is shown back in every answer: credentials belong in headers, which are sealed and never shown.
      .refine((u) => !/^https?:\/\/[^/?#]*@/i.test(u), 'put credentials in headers, not in the URL')
      .optional()
      .describe("The server's streamable HTTP endpoint"),
    headers: z
      .record(HeaderName, SecretValue)
      .optional()
      .describe('Sent with every request (e.g. authorization); stored sealed, never shown again'),
    command: storableString().min(1).max(1_000).optional().describe('A stdio server: the command the worker runs'),
    args: z.array(storableString().max(4_096)).max(100).optional(),
    env: z
      .record(EnvName, SecretValue)
      .optional()
      .describe("A stdio server's environment; stored sealed, never shown again"),
    policies: Policies.default({}),
    defaultPolicy: Policy.nullable()
      .default(null)
      .describe("For tools without a policy of their own; null: from the tool's annotations"),
    enabled: z.boolean().default(true),
  })
  .strict()
  .superRefine((b, ctx) => {
    if ((b.url === undefined) === (b.command === undefined))
      ctx.addIssue({ code: 'custom', message: 'give exactly one of url (HTTP) or command (stdio)', path: [] });
    if (b.url !== undefined && (b.args !== undefined || b.env !== undefined))
      ctx.addIssue({ code: 'custom', message: 'args and env are for a stdio server (command)', path: ['url'] });
    if (b.command !== undefined && b.headers !== undefined)
      ctx.addIssue({ code: 'custom', message: 'headers are for an HTTP server (url)', path: ['command'] });
  });

const PolicyChange = z
  .object({
    policies: Policies.optional(),
    defaultPolicy: Policy.nullable().optional(),
    enabled: z.boolean().optional(),
  })
  .strict();

const SecretShown = z.object({ hasSecret: z.literal(true), fingerprint: z.string() });
const Tool = z.object({
  name: z.string(),
  modelName: z.string().describe('The name the model calls it by: <server>__<tool>'),
  description: z.string(),
  inputSchema: z.record(z.string(), z.unknown()),
  annotations: z.object({
    title: z.string().optional(),
    readOnlyHint: z.boolean().optional(),
    destructiveHint: z.boolean().optional(),
    idempotentHint: z.boolean().optional(),
    openWorldHint: z.boolean().optional(),
  }),
  policy: Policy.describe("In force: the tool's own policy, else the server's default, else from its annotations"),
});
const ToolServer = z.object({
  name: z.string(),
  transport: z.enum(['http', 'stdio']),
  url: z.string().nullable(),
  command: z.string().nullable(),
  args: z.array(z.string()),
  headers: z.record(z.string(), SecretShown),
  env: z.record(z.string(), SecretShown),
  policies: z.record(z.string(), Policy),
  defaultPolicy: Policy.nullable(),
  enabled: z.boolean(),
  tools: z.array(Tool),
  toolsListedAt: z.string(),
  createdAt: z.string(),
  updatedAt: z.string(),
});

const errors = { 400: ErrorResponse, 403: ErrorResponse, 404: ErrorResponse, 422: ErrorResponse, 503: ErrorResponse };

/** A server as the API shows it: secrets only as their names and fingerprints. */
function view(s: ToolServerView): z.infer<typeof ToolServer> {
  const shown = (fps: Record<string, string>) =>
    Object.fromEntries(Object.entries(fps).map(([k, fingerprint]) => [k, { hasSecret: true as const, fingerprint }]));
  return {
    name: s.name,
    transport: s.transport,
    url: s.url,
    command: s.command,
    args: s.args,
    headers: shown(s.fingerprints.headers),
    env: shown(s.fingerprints.env),
    policies: s.policies,
    defaultPolicy: s.defaultPolicy,
    enabled: s.enabled,
    tools: s.tools,
    toolsListedAt: s.toolsListedAt,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
  };
}

/** Why a server was not stored, as the answer names it. */
function refused(err: unknown): never {
  if (!(err instanceof ToolServerRefusal)) throw err;
  switch (err.reason) {
    case 'egress_refused':
    case 'unknown_tool':
    case 'command_not_allowed':
      throw new ApiError(400, err.reason, err.message);
    case 'secrets_unavailable':
      throw new ApiError(503, err.reason, err.message);
    case 'unauthorized':
      throw new ApiError(422, 'tool_server_unauthorized', err.message);
    case 'not_mcp':
      throw new ApiError(422, 'not_an_mcp_server', err.message);
    case 'failed_to_start':
      throw new ApiError(422, 'tool_server_failed_to_start', err.message);
    case 'timeout':
      throw new ApiError(422, 'tool_server_timeout', err.message);
    case 'unreachable':
    case 'closed':
      throw new ApiError(422, 'tool_server_unreachable', err.message);
  }
}

/** An agent's MCP tool servers: configured by a person, each checked by connecting before it is stored. */
export function toolServerRoutes(deps: ToolServerDeps): FastifyPluginAsyncZod {
  const { pool } = deps;
  return async (app) => {
    app.put(
      '/v1/agents/:agentId/tool-servers/:name',
      {
        schema: {
          tags: ['tools'],
          summary:
            'Add or replace a tool server (MCP over streamable HTTP, or a stdio command): Keel connects, ' +
            'initialises and lists its tools first, and stores nothing when that fails',
          params: ToolServerParams,
          body: ToolServerBody,
          response: { 200: ToolServer, 201: ToolServer, ...errors },
        },
      },
      async (req, reply) => {
        const { agentId, name } = req.params;
        const b = req.body;
        // A stdio server runs a command on Keel's workers: that is an operator's decision.
        if (b.command !== undefined && req.agentScope !== '*')
          throw new ApiError(
            403,
            'forbidden',
            "a stdio tool server runs a command on Keel's workers: it needs an operator token (scoped to *)",
          );
        const policies = { policies: b.policies, defaultPolicy: b.defaultPolicy, enabled: b.enabled };
        const spec =
          b.url !== undefined
            ? { transport: 'http' as const, url: b.url, headers: b.headers ?? {}, ...policies }
            : { transport: 'stdio' as const, command: b.command!, args: b.args ?? [], env: b.env ?? {}, ...policies };
        const put = await putToolServer(deps, agentId, name, spec, req.actor).catch(refused);
        return reply.status(put.created ? 201 : 200).send(view(put.server));
      },
    );

    app.get(
      '/v1/agents/:agentId/tool-servers',
      {
        schema: {
          tags: ['tools'],
          summary: "The agent's tool servers by name, each with its tools and their policies",
          params: AgentParams,
          response: { 200: z.object({ items: z.array(ToolServer) }), ...errors },
        },
      },
      async (req) => ({ items: (await toolServers(pool, req.params.agentId)).map(view) }),
    );

    app.get(
      '/v1/agents/:agentId/tool-servers/:name',
      {
        schema: {
          tags: ['tools'],
          summary: 'One tool server, with its tools and their policies',
          params: ToolServerParams,
          response: { 200: ToolServer, ...errors },
        },
      },
      async (req) => {
        const { agentId, name } = req.params;
        const s = await toolServer(pool, agentId, name);
        if (!s) throw notFound(`tool server ${name}`);
        return view(s);
      },
    );

    app.patch(
      '/v1/agents/:agentId/tool-servers/:name',
      {
        schema: {
          tags: ['tools'],
          summary: "Change a tool server's policies (merged by tool), its default policy, or whether it is enabled",
          params: ToolServerParams,
          body: PolicyChange,
          response: { 200: ToolServer, ...errors },
        },
      },
      async (req) => {
        const { agentId, name } = req.params;
        const s = await changeToolServerPolicies(pool, { agentId, name, ...req.body }, req.actor).catch(refused);
        if (!s) throw notFound(`tool server ${name}`);
        return view(s);
      },
    );

    app.post(
      '/v1/agents/:agentId/tool-servers/:name/refresh',
      {
        schema: {
          tags: ['tools'],
          summary: "List the server's tools again; turns that begin afterwards are offered the new list",
          params: ToolServerParams,
          response: { 200: ToolServer, ...errors },
        },
      },
      async (req) => {
        const { agentId, name } = req.params;
        const s = await refreshToolServer(deps, agentId, name).catch(refused);
        if (!s) throw notFound(`tool server ${name}`);
        return view(s);
      },
    );

    app.delete(
      '/v1/agents/:agentId/tool-servers/:name',
      {
        schema: {
          tags: ['tools'],
          summary: 'Remove a tool server; turns that begin afterwards are not offered its tools',
          params: ToolServerParams,
          response: { 200: z.object({ name: z.string(), deleted: z.literal(true) }), ...errors },
        },
      },
      async (req) => {
        const { agentId, name } = req.params;
        if (!(await removeToolServer(pool, agentId, name, req.actor))) throw notFound(`tool server ${name}`);
        return { name, deleted: true as const };
      },
    );
  };
}
