import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readBody } from './http';
import type { TestKeel } from './keel';
import { eventually } from './keel';

/** What the runs list answers for one run. */
export interface RoutineRun {
  runId: string;
  workflowId: string;
  status: string;
  digest: string | null;
  sessionId: string;
  gate?: { capability: string; detail: string };
  artifactId?: string;
  prompt: string | null;
  tool: { name: string; version: number; authored: boolean } | null;
  playbook: string | null;
}

export interface RoutineApi {
  call<T = Record<string, unknown>>(
    method: 'GET' | 'POST' | 'PUT' | 'DELETE',
    url: string,
    body?: unknown,
  ): Promise<{ status: number; body: T }>;
  /** An app with a `leads` table (name, email, touches) and its records. */
  app(agentId: string, appId: string, leads: Record<string, string>[]): Promise<void>;
  /** The records of one table of an app. */
  records(agentId: string, appId: string, table: string): Promise<{ id: string; [field: string]: unknown }[]>;
  routine(
    agentId: string,
    appId: string,
    slug: string,
    body: Record<string, unknown>,
  ): Promise<{ status: number; body: Record<string, unknown> }>;
  runs(agentId: string, appId: string, slug: string): Promise<RoutineRun[]>;
  /** Run now, then the run once it has the wanted status. */
  runNow(agentId: string, appId: string, slug: string, until?: (r: RoutineRun) => boolean): Promise<RoutineRun>;
  waitForRun(
    agentId: string,
    appId: string,
    slug: string,
    until: (r: RoutineRun) => boolean,
    what: string,
  ): Promise<RoutineRun>;
}

export const finished = (r: RoutineRun) => r.status !== 'running' && r.status !== 'needs_approval';

/** A tool as the scripted model authors it: `/author {json}` in the routine's prompt. */
export const author = (tool: { name: string; title?: string; inputs?: string[]; code: string }) =>
  `/author ${JSON.stringify({ title: tool.name, purpose: `test tool ${tool.name}`, inputs: ['input'], ...tool })}`;

/** The routine API of an in-process test Keel (fastify's inject). */
export function routineApi(keel: () => TestKeel): RoutineApi {
  return routineApiOver(async (method, url, body) => {
    const res = await keel().api.inject({
      method,
      url,
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) }),
    });
    return { status: res.statusCode, body: res.json() };
  });
}

/** The routine API of a Keel API process at this base URL, over HTTP. */
export function routineApiAt(baseUrl: string): RoutineApi {
  return routineApiOver(async <T>(method: string, url: string, body?: unknown) => {
    const res = await fetch(`${baseUrl}${url}`, {
      method,
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as T };
  });
}

function routineApiOver(call: RoutineApi['call']): RoutineApi {
  const runs = async (a: string, app: string, slug: string) =>
    (await call<RoutineRun[]>('GET', `/v1/agents/${a}/apps/${app}/routines/${slug}/runs`)).body;
  const waitForRun: RoutineApi['waitForRun'] = (a, app, slug, until, what) =>
    eventually(async () => (await runs(a, app, slug)).find(until), 60_000, `run of ${slug}: ${what}`);
  return {
    call,
    async app(a, app, leads) {
      const put = await call('PUT', `/v1/agents/${a}/apps/${app}`, {
        name: app,
        tables: [{ name: 'leads', columns: ['name', 'email', 'touches'] }],
      });
      if (put.status !== 200) throw new Error(`app: ${put.status} ${JSON.stringify(put.body)}`);
      for (const lead of leads) await call('POST', `/v1/agents/${a}/apps/${app}/tables/leads/records`, lead);
    },
    records: async (a, app, table) =>
      (await call<{ id: string }[]>('GET', `/v1/agents/${a}/apps/${app}/tables/${table}/records`)).body,
    routine: (a, app, slug, body) =>
      call('PUT', `/v1/agents/${a}/apps/${app}/routines/${slug}`, {
        label: slug,
        schedule: { expr: 'daily' },
        ...body,
      }),
    runs,
    async runNow(a, app, slug, until = finished) {
      const before = (await runs(a, app, slug)).map((r) => r.runId);
      const res = await call('POST', `/v1/agents/${a}/apps/${app}/routines/${slug}/run`);
      if (res.status !== 202) throw new Error(`run now: ${res.status} ${JSON.stringify(res.body)}`);
      return waitForRun(a, app, slug, (r) => !before.includes(r.runId) && until(r), 'a new run');
    },
    waitForRun,
  };
}

/** The activity types a run's workflow history scheduled, in order. */
export async function scheduledActivities(
  keel: TestKeel,
  run: { workflowId: string; runId: string },
): Promise<string[]> {
  const history = await keel.client.workflow.getHandle(run.workflowId, run.runId).fetchHistory();
  return (history.events ?? []).flatMap((e) =>
    e.activityTaskScheduledEventAttributes?.activityType?.name
      ? [e.activityTaskScheduledEventAttributes.activityType.name]
      : [],
  );
}

/**
 * Records that Ada was contacted (a new record each time the upsert really executes: no id), drafts a note, then sends
 * it: the send waits for approval.
 */
export const CONTACT_ADA = {
  name: 'contactAda',
  code: `async function contactAda({ input }) {
    const ada = await data.get('leads', 'l1');
    await data.upsert('leads', { name: 'contacted ' + ada.name });
    const note = await ai.write('a short note to ' + ada.name);
    await send('Contacted ' + ada.name + ': ' + note);
    return 'contacted ' + ada.name;
  }`,
};

/** How many times a tool's upsert of a "contacted Ada" record really executed. */
export const contactRecords = async (r: RoutineApi, a: string, app: string) =>
  (await r.records(a, app, 'leads')).filter((x) => x.name === 'contacted Ada').length;

/** A local HTTP integration for `integrations.call` (KEEL_INTEGRATIONS names it). */
export interface Integration {
  url: string;
  /** The idempotency-key header of every request, in arrival order (a key starts with the run id). */
  keys: string[];
  /** Resolves when the first request arrives. */
  firstRequest: Promise<void>;
  close(): Promise<void>;
}

/**
 * Answers every request with `answer`, sent as this exact text so that its keys keep the order it has here. With
 * `holdFirst` the first request is never answered: the worker that sent it is to die waiting.
 */
export async function startIntegration(answer: string, opts: { holdFirst?: boolean } = {}): Promise<Integration> {
  const keys: string[] = [];
  let arrived: () => void = () => undefined;
  const firstRequest = new Promise<void>((resolve) => (arrived = resolve));
  const server = createServer((req, res) => {
    void readBody(req).then(() => {
      keys.push(String(req.headers['idempotency-key']));
      arrived();
      if (opts.holdFirst && keys.length === 1) return;
      res.writeHead(200, { 'content-type': 'application/json' }).end(answer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/call`,
    keys,
    firstRequest,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
