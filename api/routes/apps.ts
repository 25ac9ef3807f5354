import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Pool } from '../../db/pool';
import { AppDefinition, RecordId } from '../../domain/apps';
import { storableJson } from '../../domain/text';
import { listAppRecords, putApp, upsertAppRecord, type AppResult } from '../../services/apps';
import { ApiError } from '../errors';
import { ErrorResponse, Id } from '../schemas';

/** An app's path parameters, which the routes of what an app holds (routines, tools, artifacts) extend. */
export const AppParams = z.object({ agentId: Id, appId: Id });
const TableParams = AppParams.extend({ table: z.string().min(1).max(64) });
const App = z.object({
  appId: z.string(),
  name: z.string(),
  tables: z.array(z.object({ name: z.string(), columns: z.array(z.string()) })),
  updatedAt: z.string(),
});
const AppRecord = z.object({ id: z.string() }).catchall(z.unknown());

/** A refusal in the API's error shape and status. */
function unwrap<T>(r: AppResult<T>): T {
  if (r.ok) return r.value;
  throw new ApiError(r.error.status, r.error.code, r.error.message, r.error.details);
}

export function appRoutes(pool: Pool): FastifyPluginAsyncZod {
  return async (app) => {
    app.put(
      '/v1/agents/:agentId/apps/:appId',
      {
        schema: {
          tags: ['apps'],
          summary: 'Create or update an app and its tables',
          params: AppParams,
          body: AppDefinition,
          response: { 200: App, 400: ErrorResponse, 404: ErrorResponse },
        },
      },
      async (req) => {
        return putApp(pool, req.params.agentId, req.params.appId, req.body);
      },
    );

    app.post(
      '/v1/agents/:agentId/apps/:appId/tables/:table/records',
      {
        schema: {
          tags: ['apps'],
          summary: 'Upsert a record by id (a new id when none is given)',
          params: TableParams,
          body: z.object({ id: RecordId.optional() }).catchall(storableJson()),
          response: { 200: AppRecord, 201: AppRecord, 400: ErrorResponse, 404: ErrorResponse },
        },
      },
      async (req, reply) => {
        const { agentId, appId, table } = req.params;
        const { record, created } = unwrap(await upsertAppRecord(pool, agentId, appId, table, req.body));
        return reply.status(created ? 201 : 200).send(record);
      },
    );

    app.get(
      '/v1/agents/:agentId/apps/:appId/tables/:table/records',
      {
        schema: {
          tags: ['apps'],
          summary: "A table's records",
          params: TableParams,
          response: { 200: z.array(AppRecord), 404: ErrorResponse },
        },
      },
      async (req) => {
        const { agentId, appId, table } = req.params;
        return unwrap(await listAppRecords(pool, agentId, appId, table));
      },
    );
  };
}
