import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Pool } from '../../db/pool';
import { listAppTools } from '../../services/routines';
import { ErrorResponse } from '../schemas';
import { AppParams } from './apps';
import { unwrap } from './routines';

const Tool = z.object({
  name: z.string(),
  version: z.number(),
  title: z.string(),
  purpose: z.string(),
  inputs: z.array(z.string()),
  code: z.string(),
  authoredBy: z.string(),
  createdAt: z.string(),
});

/** The tools an app's routine runs have authored and saved. */
export function routineToolRoutes(pool: Pool): FastifyPluginAsyncZod {
  return async (app) => {
    app.get(
      '/v1/agents/:agentId/apps/:appId/tools',
      {
        schema: {
          tags: ['routines'],
          summary: "The app's saved tools (latest version of each)",
          params: AppParams,
          response: { 200: z.array(Tool), 404: ErrorResponse },
        },
      },
      async (req) => {
        const { agentId, appId } = req.params;
        return unwrap(await listAppTools(pool, agentId, appId)).map(({ authoredInRun: _run, ...t }) => t);
      },
    );
  };
}
