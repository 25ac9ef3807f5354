import { randomUUID } from 'node:crypto';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { getApp, listRecords, putApp, upsertRecord } from '../../db/apps';
import type { Pool } from '../../db/pool';
import { AppDefinition, RecordId, unknownFields } from '../../domain/apps';
import { containsNul } from '../../domain/text';
import { assertAgentAccess } from '../auth';
import { ApiError, notFound } from '../errors';
import { ErrorResponse, Id } from '../schemas';

const AppParams = z.object({ agentId: Id, appId: Id });
const TableParams = AppParams.extend({ table: z.string().min(1).max(64) });
const App = z.object({
  appId: z.string(),
  name: z.string(),
  tables: z.array(z.object({ name: z.string(), columns: z.array(z.string()) })),
  updatedAt: z.string(),
});
const AppRecord = z.object({ id: z.string() }).catchall(z.unknown());

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
        assertAgentAccess(req, req.params.agentId);
        return putApp(pool, req.params.agentId, req.params.appId, req.body);
      },
    );

    /** The table of the app, or 404 naming what is missing. */
    const tableOf = async (agentId: string, appId: string, table: string) => {
      const found = await getApp(pool, agentId, appId);
      if (!found) throw notFound(`app ${appId}`);
      const t = found.tables.find((x) => x.name === table);
      if (!t) throw notFound(`table ${table} of app ${appId}`);
      return t;
    };

    app.post(
      '/v1/agents/:agentId/apps/:appId/tables/:table/records',
      {
        schema: {
          tags: ['apps'],
          summary: 'Upsert a record by id (a new id when none is given)',
          params: TableParams,
          body: z.object({ id: RecordId.optional() }).catchall(z.unknown()),
          response: { 200: AppRecord, 201: AppRecord, 400: ErrorResponse, 404: ErrorResponse },
        },
      },
      async (req, reply) => {
        const { agentId, appId, table } = req.params;
        assertAgentAccess(req, agentId);
        const t = await tableOf(agentId, appId, table);
        const unknown = unknownFields(req.body, t.columns);
        if (unknown.length)
          throw new ApiError(400, 'unknown_columns', `table ${table} has no column(s): ${unknown.join(', ')}`, {
            columns: t.columns,
          });
        if (containsNul(req.body))
          throw new ApiError(400, 'invalid_request', 'record values must not contain the NUL character');
        const { record, created } = await upsertRecord(
          pool,
          agentId,
          appId,
          table,
          req.body.id ?? randomUUID(),
          req.body,
        );
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
        assertAgentAccess(req, agentId);
        await tableOf(agentId, appId, table);
        return listRecords(pool, agentId, appId, table);
      },
    );
  };
}
