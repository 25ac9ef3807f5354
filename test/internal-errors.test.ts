import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { Client, Connection } from '@temporalio/client';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildApi } from '../api/server';
import { migrate } from '../db/migrate';
import { createPool } from '../db/pool';
import { LOOPBACK_ALLOW } from './support/egress';
import { startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { freshNamespace } from './support/namespaces';
import { REQUIRED_SAMPLES } from './support/secret-samples';

/**
 * An internal error says why, in the log (issue 50): a 500 is one line at error level with the request id (which the
 * answer names too), the route's pattern and the cause (the error's class, message and code, its stack, PostgreSQL's
 * own fields), and never the request's body or its authorization header. The causes are real: a PostgreSQL whose
 * tasks table no longer takes a title as text, and a Temporal namespace without Keel's search attributes.
 */
const TOKEN = 'internal-errors-operator-7c1e93';
const STRIPE = REQUIRED_SAMPLES.find((s) => s.rule === 'stripe-access-token')!.secret;

interface LogLine {
  level: number;
  reqId: string;
  route?: string;
  msg: string;
  [field: string]: unknown;
}

/** A logger stream that keeps every line the API writes (pino's JSON, one object a line). */
function capture(): { lines: LogLine[]; stream: Writable } {
  const lines: LogLine[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line.trim()) lines.push(JSON.parse(line) as LogLine);
      done();
    },
  });
  return { lines, stream };
}

interface ErrorAnswer {
  error: { code: string; message: string; details: { requestId: string } };
}

const admin = new pg.Client({ connectionString: inject('databaseUrl') });
const database = `keel_internal_errors_${randomUUID().slice(0, 8)}`;
let keel: TestKeel | undefined;
beforeAll(async () => {
  await admin.connect();
});
afterAll(async () => {
  await keel?.stop();
  await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
  await admin.end();
});

describe('a 500 from PostgreSQL', () => {
  it('is logged at error level with the request id the answer names, the route and the cause, masked', async () => {
    // A database of this test's own, whose tasks table takes an integer for a title: every task PostgreSQL is given
    // fails there, as a column changed by hand would make it fail, and its error quotes the title it was sent.
    await admin.query(`CREATE DATABASE ${database}`);
    const url = new URL(inject('databaseUrl'));
    url.pathname = `/${database}`;
    await migrate(url.toString());
    const db = new pg.Client({ connectionString: url.toString() });
    await db.connect();
    await db.query('ALTER TABLE tasks ALTER COLUMN title TYPE integer USING 0');
    await db.end();
    const log = capture();
    keel = await startTestKeel({
      databaseUrl: url.toString(),
      worker: false,
      tokens: new Map([[TOKEN, '*']]),
      apiLog: log.stream,
    });

    const res = await keel.api.inject({
      method: 'POST',
      url: `/v1/agents/${uniqueId('a')}/tasks`,
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ title: STRIPE, description: 'the body of the task' }),
    });
    expect(res.statusCode, res.body).toBe(500);
    const { error } = res.json<ErrorAnswer>();
    const { requestId } = error.details;
    expect(requestId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(error).toEqual({
      code: 'internal',
      message: `internal error (request ${requestId}; the API's log says why)`,
      details: { requestId },
    });

    const errors = log.lines.filter((l) => l.level >= 50);
    expect(errors).toHaveLength(1);
    const [line] = errors;
    expect(line).toMatchObject({
      level: 50,
      reqId: requestId,
      route: 'POST /v1/agents/:agentId/tasks',
      status: 500,
      // The secret scanner's Stripe rule takes the closing quote with the key.
      msg:
        'POST /v1/agents/:agentId/tasks answered 500: DatabaseError: ' +
        'invalid input syntax for type integer: "[redacted: stripe-access-token]',
      cause: {
        type: 'DatabaseError',
        code: '22P02',
        message: 'invalid input syntax for type integer: "[redacted: stripe-access-token]',
        postgres: { severity: 'ERROR', where: 'unnamed portal parameter $2 = …' },
      },
    });
    // The stack leads back to Keel's own code, not only to pg's socket.
    expect((line!.cause as { stack: string }).stack).toMatch(/\n +at .*\/db\/tasks\.ts:\d+/);
    const text = JSON.stringify(line);
    expect(text).not.toContain(STRIPE);
    expect(text).not.toContain(TOKEN);
    expect(text).not.toContain('the body of the task');
  });
});

describe('a 500 from Temporal (temporal_refused)', () => {
  it('is logged the same way, with Temporal’s status under the cause', async () => {
    const connection = await Connection.connect({ address: inject('temporalAddress') });
    const pool = createPool(inject('databaseUrl'));
    const namespace = await freshNamespace(connection, 'keel-ie');
    const log = capture();
    const api = await buildApi({
      pool,
      temporal: new Client({ connection, namespace }),
      taskQueue: uniqueId('nowhere'),
      tokens: new Map([[TOKEN, '*']]),
      egressAllow: LOOPBACK_ALLOW,
      logger: { level: 'debug', stream: log.stream },
    });
    try {
      const agent = uniqueId('a');
      const call = (method: 'PUT', url: string, body: unknown) =>
        api.inject({
          method,
          url,
          headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
          payload: JSON.stringify(body),
        });
      expect((await call('PUT', `/v1/agents/${agent}/apps/crm`, { name: 'crm', tables: [] })).statusCode).toBe(200);
      const res = await call('PUT', `/v1/agents/${agent}/apps/crm/routines/nightly`, {
        label: 'nightly',
        schedule: { expr: 'daily' },
        prompt: 'Summarize the day',
      });
      expect(res.statusCode, res.body).toBe(500);
      const { error } = res.json<ErrorAnswer>();
      expect(error.code).toBe('temporal_refused');
      expect(error.message).toMatch(/^Temporal refused the request \(INVALID_ARGUMENT\): .*no mapping defined for/);
      expect(error.message).toMatch(/\(request [0-9a-f-]{36}; the API's log says why\)$/);

      const errors = log.lines.filter((l) => l.level >= 50);
      expect(errors).toHaveLength(1);
      const [line] = errors;
      expect(line).toMatchObject({
        level: 50,
        reqId: error.details.requestId,
        route: 'PUT /v1/agents/:agentId/apps/:appId/routines/:slug',
        status: 500,
        cause: {
          type: 'ServiceError',
          cause: { code: 3, message: expect.stringMatching(/^3 INVALID_ARGUMENT: .*no mapping defined for/) as string },
        },
      });
      expect(JSON.stringify(line)).not.toContain(TOKEN);
    } finally {
      await api.close();
      await pool.end();
      await connection.close();
    }
  });
});
