import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Pool } from '../../db/pool';
import { getArtifact } from '../../services/routines';
import { notFound } from '../errors';
import { ErrorResponse } from '../schemas';
import { AppParams } from './apps';

const ArtifactParams = AppParams.extend({
  artifactId: z.string().regex(/^art_[0-9a-f]{8}$/, 'an artifact id (art_ and 8 hex digits)'),
});
const Artifact = z.object({
  artifactId: z.string(),
  runId: z.string(),
  producedBy: z.string(),
  number: z.number(),
  title: z.string(),
  content: z.string(),
  createdAt: z.string(),
});

/** The artifacts (Markdown) an app's routine runs produce. */
export function artifactRoutes(pool: Pool): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/v1/agents/:agentId/apps/:appId/artifacts/:artifactId',
      {
        schema: {
          tags: ['routines'],
          summary: 'A run artifact (Markdown)',
          params: ArtifactParams,
          response: { 200: Artifact, 404: ErrorResponse },
        },
      },
      async (req) => {
        const { agentId, appId, artifactId } = req.params;
        const a = await getArtifact(pool, agentId, appId, artifactId);
        if (!a) throw notFound(`artifact ${artifactId}`);
        return a;
      },
    );
  };
}
