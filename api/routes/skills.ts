import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Pool } from '../../db/pool';
import { SkillName } from '../../domain/delegation';
import { storableString } from '../../domain/text';
import { putSkill } from '../../services/tasks';
import { ErrorResponse, Id } from '../schemas';

/** An agent's skills, which a task may require of the delegate that claims it. */
export function skillRoutes(pool: Pool): FastifyPluginAsyncZod {
  return async (app) => {
    app.put(
      '/v1/agents/:agentId/skills/:name',
      {
        schema: {
          tags: ['skills'],
          summary: 'Create or replace a skill',
          params: z.object({ agentId: Id, name: SkillName }),
          body: z.object({ body: storableString().min(1).max(200_000) }).strict(),
          response: {
            200: z.object({ name: z.string(), body: z.string(), updatedAt: z.string() }),
            400: ErrorResponse,
            404: ErrorResponse,
          },
        },
      },
      async (req) => {
        return putSkill(pool, req.params.agentId, req.params.name, req.body.body);
      },
    );
  };
}
