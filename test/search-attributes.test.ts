import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createInterface } from 'node:readline';
import { Client, Connection, NamespaceNotFoundError } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildApi } from '../api/server';
import { createPool, type Pool } from '../db/pool';
import { ALL_SEARCH_ATTRIBUTES } from '../domain/search-attributes';
import { freePort } from '../scripts/ports';
import { spawnTs, stopProcess } from '../scripts/processes';
import {
  ensureSearchAttributes,
  missingSearchAttributes,
  MissingSearchAttributesError,
} from '../services/temporal-namespace';
import { namespaceNotFound } from '../services/temporal-status';
import { uniqueId } from './support/keel';
import { freshNamespace } from './support/namespaces';
import { LOOPBACK_ALLOW } from './support/egress';

const KEEL = ALL_SEARCH_ATTRIBUTES.map((k) => k.name);
const KEYWORD = temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;

let connection: Connection;
let pool: Pool;
beforeAll(async () => {
  connection = await Connection.connect({ address: inject('temporalAddress') });
  pool = createPool(inject('databaseUrl'));
});
afterAll(async () => {
  await connection?.close();
  await pool?.end();
});

interface ErrorBody {
  error: { code: string; message: string };
}

describe('a namespace Temporal does not find (its own database restarting, as the cluster soak saw)', () => {
  it('answers 503 unavailable, naming it, not a 500: a client retries a 503', async () => {
    const client = new Client({ connection, namespace: `keel-gone-${randomUUID().slice(0, 8)}` });
    const api = await buildApi({
      pool,
      temporal: client,
      taskQueue: uniqueId('nowhere'),
      tokens: undefined,
      egressAllow: LOOPBACK_ALLOW,
    });
    try {
      const res = await api.inject({
        method: 'POST',
        url: `/v1/agents/${uniqueId('a')}/conversations/c1/messages`,
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify({ text: 'hello' }),
      });
      expect(res.statusCode).toBe(503);
      const { error } = res.json<ErrorBody>();
      expect(error.code).toBe('unavailable');
      expect(error.message).toMatch(/^Temporal does not find namespace keel-gone-\w+ now \(its database may be/);
    } finally {
      await api.close();
    }
  });
});

describe('namespaceNotFound: every shape the SDK gives that answer', () => {
  it('its NamespaceNotFoundError, and the plain Error an update-with-start carries; nothing else', () => {
    expect(namespaceNotFound(new NamespaceNotFoundError('default'))).toBe('default');
    expect(namespaceNotFound(new Error('Namespace default is not found.'))).toBe('default');
    expect(namespaceNotFound(new Error('Workflow not found'))).toBeUndefined();
    expect(namespaceNotFound('Namespace default is not found.')).toBeUndefined();
  });
});

describe("a Temporal namespace without Keel's search attributes", () => {
  it('PUT routine answers a 500 saying what Temporal refused (not 503); the start check registers them', async () => {
    const namespace = await freshNamespace(connection, 'keel-sa');
    expect(await missingSearchAttributes(connection, namespace)).toEqual(KEEL);

    const client = new Client({ connection, namespace });
    const api = await buildApi({
      pool,
      temporal: client,
      taskQueue: uniqueId('nowhere'),
      tokens: undefined,
      egressAllow: LOOPBACK_ALLOW,
    });
    try {
      const a = uniqueId('a');
      const json = { 'content-type': 'application/json' };
      const call = (method: 'PUT' | 'DELETE', url: string, body?: unknown) =>
        api.inject({ method, url, ...(body === undefined ? {} : { headers: json, payload: JSON.stringify(body) }) });
      const app = await call('PUT', `/v1/agents/${a}/apps/crm`, { name: 'crm', tables: [] });
      expect(app.statusCode).toBe(200);
      const routine = `/v1/agents/${a}/apps/crm/routines/nightly`;
      const definition = { label: 'nightly', schedule: { expr: 'daily' }, prompt: 'hello' };

      // Temporal's INVALID_ARGUMENT is a refusal that retrying will not fix: never "a dependency is not reachable".
      const refused = await call('PUT', routine, definition);
      expect(refused.statusCode).toBe(500);
      const { error } = refused.json<ErrorBody>();
      expect(error.code).toBe('temporal_refused');
      expect(error.message).toMatch(/^Temporal refused the request \(INVALID_ARGUMENT\): .*no mapping defined for/);
      expect(error.message).toMatch(/search attribute Keel(AgentId|Kind|Routine)/);
      expect(error.message).not.toMatch(/not reachable/);

      // What the worker and the API run at start: registers every one of them, and a second run has nothing to do.
      expect(await ensureSearchAttributes(connection, namespace)).toEqual(KEEL);
      expect(await missingSearchAttributes(connection, namespace)).toEqual([]);
      expect(await ensureSearchAttributes(connection, namespace)).toEqual([]);

      const created = await call('PUT', routine, definition);
      expect([created.statusCode, created.json()]).toEqual([201, expect.objectContaining({ slug: 'nightly' })]);
      expect((await call('DELETE', routine)).statusCode).toBe(200);
    } finally {
      await api.close();
    }
  });

  it('the API and the worker register them at start, and say so', async () => {
    const started: ChildProcess[] = [];
    // Settled, not all: every process started is stopped, even when the other one failed first.
    const ran = await Promise.allSettled(
      (['api', 'worker'] as const).map(async (name) => {
        const namespace = await freshNamespace(connection, 'keel-sa');
        const child = spawnTs(`${name}/main.ts`, await keelEnv(namespace), ['ignore', 'pipe', 'inherit']);
        started.push(child);
        const line = await firstLine(child, /registered the search attributes/);
        const names = KEEL.join(', ');
        expect(line).toBe(`keel ${name}: registered the search attributes ${names} in namespace ${namespace}`);
        expect(await missingSearchAttributes(connection, namespace)).toEqual([]);
      }),
    );
    await Promise.all(started.map((c) => stopProcess(c)));
    for (const r of ran) if (r.status === 'rejected') throw r.reason;
  });

  it('where they cannot be registered, the API and the worker exit naming the missing ones', async () => {
    const namespace = await freshNamespace(connection, 'keel-sa');
    // A real refusal: the dev server's SQLite visibility has 10 Keyword slots. Four of Keel's and six others fill
    // them, so KeelJobId and KeelRoutine cannot be added.
    const have = KEEL.slice(0, 4);
    const fillers = Array.from({ length: 6 }, (_, i) => `Filler${i}`);
    const searchAttributes = Object.fromEntries([...have, ...fillers].map((name) => [name, KEYWORD]));
    await connection.operatorService.addSearchAttributes({ namespace, searchAttributes });
    const missing = KEEL.slice(4);
    expect(missing).toEqual(['KeelJobId', 'KeelRoutine']);

    const err = await ensureSearchAttributes(connection, namespace).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(MissingSearchAttributesError);
    expect((err as MissingSearchAttributesError).missing).toEqual(missing);
    expect((err as Error).message).toContain(`lacks Keel's search attributes KeelJobId, KeelRoutine`);
    expect((err as Error).message).toMatch(/Temporal answered INVALID_ARGUMENT: .*cannot have more than 10 search/);

    const env = await keelEnv(namespace);
    const run = (name: string) => exitOf(spawnTs(`${name}/main.ts`, env, ['ignore', 'pipe', 'pipe']));
    const [api, worker] = await Promise.all([run('api'), run('worker')]);
    for (const [name, ran] of [
      ['api', api],
      ['worker', worker],
    ] as const) {
      expect(ran.code, `${name}: ${ran.stderr}`).toBe(1);
      const lacks = `Temporal namespace ${namespace} lacks Keel's search attributes KeelJobId, KeelRoutine`;
      expect(ran.stderr).toContain(`keel ${name} failed: ${lacks}`);
      expect(ran.stderr).toMatch(/Temporal answered [A-Z_]+: .*cannot have more than 10 search attribute/);
      expect(ran.stderr).toContain(`--name KeelJobId --name KeelRoutine --type Keyword`);
    }
  });
});

/** What worker/main.ts and api/main.ts need to run against a namespace (the API on a free port). */
async function keelEnv(namespace: string): Promise<NodeJS.ProcessEnv> {
  return {
    ...process.env,
    DATABASE_URL: inject('databaseUrl'),
    TEMPORAL_ADDRESS: inject('temporalAddress'),
    TEMPORAL_NAMESPACE: namespace,
    KEEL_TASK_QUEUE: uniqueId('nowhere'),
    KEEL_API_PORT: String(await freePort()),
    KEEL_WORKFLOW_BUNDLE: inject('workflowBundlePath'),
    KEEL_MODEL: 'scripted',
  };
}

/** The first line of a process's output that matches; an error when it exits first or prints none within 60 s. */
function firstLine(child: ChildProcess, pattern: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no line matching ${pattern} within 60 s`)), 60_000);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (!pattern.test(line)) return;
      clearTimeout(timer);
      resolve(line);
    });
    child.once('exit', (code) => reject(new Error(`exited (${code}) before printing ${pattern}`)));
  });
}

/** The exit code and error output of a process (killed if it has not exited within 60 s). */
function exitOf(child: ChildProcess): Promise<{ code: number | null; stderr: string }> {
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  child.stdout?.resume();
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    }),
  );
}
