import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError, notFound } from './errors';

declare module 'fastify' {
  interface FastifyRequest {
    /** The agent the bearer token is scoped to; `*` for every agent. */
    agentScope: string;
  }
}

/**
 * Bearer tokens from KEEL_API_TOKENS (token=agentId, `*` for all). Without tokens (development, loopback only)
 * every request has every agent. /healthz and the OpenAPI pages need no token.
 */
export function registerAuth(app: FastifyInstance, tokens: Map<string, string> | undefined): void {
  app.decorateRequest('agentScope', '*');
  if (!tokens) return;
  // Tokens are compared as SHA-256 digests: equal length always, so the comparison reveals neither content nor length.
  const digest = (t: string) => createHash('sha256').update(t).digest();
  const entries = [...tokens.entries()].map(([token, agent]) => ({ token: digest(token), agent }));
  app.addHook('onRequest', async (req) => {
    const path = req.url.split('?')[0] ?? '';
    if (path === '/healthz' || path === '/docs' || path.startsWith('/docs/')) return;
    const header = req.headers.authorization ?? '';
    const m = /^Bearer\s+(\S+)$/i.exec(header);
    if (!m?.[1]) throw new ApiError(401, 'unauthorized', 'missing bearer token');
    const presented = digest(m[1]);
    // Every token is compared, so timing says nothing about which one nearly matched.
    let agent: string | undefined;
    for (const e of entries) if (timingSafeEqual(e.token, presented)) agent = e.agent;
    if (agent === undefined) throw new ApiError(401, 'unauthorized', 'unknown bearer token');
    req.agentScope = agent;
  });
}

/** A token scoped to one agent sees every other agent's resources as absent. */
export function assertAgentAccess(req: FastifyRequest, agentId: string): void {
  if (req.agentScope !== '*' && req.agentScope !== agentId) throw notFound(`agent ${agentId}`);
}
