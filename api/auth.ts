import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError, notFound } from './errors';

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

/**
 * Bearer tokens from KEEL_API_TOKENS (token=agentId, `*` for all). Without tokens (development, loopback only)
 * every request has every agent. /healthz, the OpenAPI pages and the console's static files (the page then signs in)
 * need no token.
 */
export function registerAuth(app: FastifyInstance, tokens: Map<string, string> | undefined): void {
  app.decorateRequest('agentScope', '*');
  // With tokens, every route that records an actor needs one, and the hook below sets it before the handler runs.
  app.decorateRequest('actor', tokens ? 'unauthenticated' : 'dev');
  if (!tokens) return;
  // Tokens are compared as SHA-256 digests: equal length always, so the comparison reveals neither content nor length.
  const digest = (t: string) => createHash('sha256').update(t).digest();
  const entries = [...tokens.entries()].map(([token, agent]) => ({ token: digest(token), agent }));
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
    let agent: string | undefined;
    for (const e of entries) if (timingSafeEqual(e.token, presented)) agent = e.agent;
    if (agent === undefined) throw new ApiError(401, 'unauthorized', 'unknown bearer token');
    req.agentScope = agent;
    req.actor = tokenActor(presented);
  });
}

/** 48 bits of the token's digest: tells a deployment's tokens apart, and gives nothing to log in with. */
const tokenActor = (digest: Buffer) => `token:${digest.toString('hex').slice(0, 12)}`;

/** Operators' routes: a token scoped to one agent sees none of them. */
export function assertOperator(scope: string): void {
  if (scope !== '*') throw notFound('route');
}

/** A token scoped to one agent sees every other agent's resources as absent. */
export function assertAgentAccess(req: FastifyRequest, agentId: string): void {
  if (req.agentScope !== '*' && req.agentScope !== agentId) throw notFound(`agent ${agentId}`);
}

/** A route's path parameters, once the caller may act for their agent (assertAgentAccess): 404 otherwise. */
export function agentParams<P extends { agentId: string }>(req: FastifyRequest & { params: P }): P {
  assertAgentAccess(req, req.params.agentId);
  return req.params;
}
