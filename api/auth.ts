import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { TOKEN_DIGEST_PREFIX } from '../domain/config';
import { ApiError } from './errors';

declare module 'fastify' {
  interface FastifyRequest {
    /** The agent the bearer token is scoped to; `*` for every agent. */
    agentScope: string;
    /**
     * Who made the request, as the audit trail records it: `token:<first 12 hex digits of the token's SHA-256>`
     * (an operator finds which token with `printf %s "$TOKEN" | sha256sum`), or `dev` without tokens. Never the
     * token itself.
     */
    actor: string;
  }
}

/**
 * The cookie that carries an operator's token to the codec server (api/routes/codec.ts) for the Temporal Web UI,
 * which sends cookies but no bearer token of Keel's. Only /codec/ paths read it.
 */
export const CODEC_COOKIE = 'keel_codec';

/** The prefix of a token's agent that makes it read-only (`token=ro:agentId`, `token=ro:*`). */
export const READ_ONLY_PREFIX = 'ro:';

/** Routes no agent's token reaches: every agent's runs and approvals, Temporal's codec, the metrics over all agents. */
const OPERATOR_ROUTES = ['/v1/runs/', '/v1/approvals', '/codec/', '/metrics'];
/** Where an agent's token finds what an operators' route would have shown it. */
const OWN_ROUTE: Record<string, string> = { '/v1/approvals': 'GET /v1/agents/:agentId/approvals' };
/** Routes of one agent: the token must be that agent's, or an operator's. */
const AGENT_ROUTE = '/v1/agents/:agentId';
const READS = new Set(['GET', 'HEAD']);

/**
 * Bearer tokens from KEEL_API_TOKENS (token=agentId, `*` for all, `ro:` before either for a token that only reads;
 * `sha256:<hex>` in place of a token names it by its digest).
 * Without tokens (development, loopback only) every request has every agent. /healthz, the OpenAPI pages and the
 * console's static files (the page then signs in) need no token.
 *
 * This hook is the one place access is decided, from the route's own pattern and parameters, before any handler
 * runs: an agent's routes for its own token or an operator's, operators' routes for operators, and nothing but reads
 * for a read-only token. A route added under /v1/agents/:agentId is guarded with no check of its own.
 */
export function registerAuth(app: FastifyInstance, tokens: Map<string, string> | undefined): void {
  app.decorateRequest('agentScope', '*');
  // With tokens, every route that records an actor needs one, and the hook below sets it before the handler runs.
  app.decorateRequest('actor', tokens ? 'unauthenticated' : 'dev');
  if (!tokens) return;
  // Tokens are compared as SHA-256 digests: equal length always, so the comparison reveals neither content nor length.
  const digest = (t: string) => createHash('sha256').update(t).digest();
  const entries = [...tokens.entries()].map(([token, grant]) => {
    const readOnly = grant.startsWith(READ_ONLY_PREFIX);
    // A token configured by its digest is compared by it: the configuration need not hold the token.
    const known = token.startsWith(TOKEN_DIGEST_PREFIX)
      ? Buffer.from(token.slice(TOKEN_DIGEST_PREFIX.length), 'hex')
      : digest(token);
    return { token: known, agent: readOnly ? grant.slice(READ_ONLY_PREFIX.length) : grant, readOnly };
  });
  app.addHook('onRequest', async (req) => {
    const path = req.url.split('?')[0] ?? '';
    if (path === '/healthz' || path === '/docs' || path.startsWith('/docs/')) return;
    if (path === '/console' || path.startsWith('/console/')) return;
    const codec = path.startsWith('/codec/');
    // A browser's CORS preflight carries no credentials; the codec routes' CORS answers it.
    if (codec && req.method === 'OPTIONS') return;
    const header = req.headers.authorization ?? '';
    const bearer = /^Bearer\s+(\S+)$/i.exec(header)?.[1];
    const token = bearer ?? (codec ? req.cookies[CODEC_COOKIE] : undefined);
    if (!token) throw new ApiError(401, 'unauthorized', 'missing bearer token');
    const presented = digest(token);
    // Every token is compared, so timing says nothing about which one nearly matched.
    let grant: (typeof entries)[number] | undefined;
    for (const e of entries) if (timingSafeEqual(e.token, presented)) grant = e;
    if (grant === undefined) throw new ApiError(401, 'unauthorized', 'unknown bearer token');
    req.agentScope = grant.agent;
    req.actor = tokenActor(presented);
    decideAccess(req, grant);
  });
}

/** The gate: 403, naming what the token may not do, unless the route is the token's to reach. */
function decideAccess(req: FastifyRequest, grant: { agent: string; readOnly: boolean }): void {
  const route = req.routeOptions.url;
  // An unknown route is answered 404 by the router's own handler; nothing there to guard.
  if (route === undefined) return;
  const operator = grant.agent === '*';
  if (OPERATOR_ROUTES.some((r) => route.startsWith(r)) && !operator) {
    const own = OWN_ROUTE[route];
    throw new ApiError(
      403,
      'forbidden',
      `${route} is for operators' tokens (scoped to every agent, *); this token is for agent ${grant.agent}` +
        (own ? `: use ${own}` : ''),
    );
  }
  if (route === AGENT_ROUTE || route.startsWith(`${AGENT_ROUTE}/`)) {
    const { agentId } = req.params as { agentId: string };
    if (!operator && agentId !== grant.agent)
      throw new ApiError(403, 'forbidden', `this token is for agent ${grant.agent}, not for agent ${agentId}`);
  }
  // The codec's POSTs read: they change nothing of Keel's.
  if (grant.readOnly && !READS.has(req.method) && !route.startsWith('/codec/'))
    throw new ApiError(403, 'forbidden', `this token is read-only: ${req.method} ${route} would change something`);
}

/** 48 bits of the token's digest: tells a deployment's tokens apart, and gives nothing to log in with. */
const tokenActor = (digest: Buffer) => `token:${digest.toString('hex').slice(0, 12)}`;
