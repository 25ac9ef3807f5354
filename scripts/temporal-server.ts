import { spawn, spawnSync, type ChildProcess, type StdioOptions } from 'node:child_process';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import pg from 'pg';
import { createDatabasesIfMissing } from '../db/databases';
import { waitForTemporal } from './dev-server';
import { ensureSearchAttributes } from '../services/temporal-namespace';
import type { GoTool } from './go-tools';
import { exitedEarly, spawnKeepingTail, stopProcess, REPO_ROOT } from './processes';

/**
 * A real Temporal server (not the dev server): every service in one process, history and visibility in PostgreSQL,
 * configured by deploy/temporal/keel-postgres.yaml. `npm run cluster` and the cluster soak run it.
 */
export const TEMPORAL_SERVER_VERSION = '1.29.1';

/** The server and its SQL tool (temporal-sql-tool), built together from the server's module. */
export const TEMPORAL_SERVER: GoTool = {
  label: `the Temporal server v${TEMPORAL_SERVER_VERSION}`,
  folder: 'temporal-server',
  version: TEMPORAL_SERVER_VERSION,
  packages: [
    `go.temporal.io/server/cmd/server@v${TEMPORAL_SERVER_VERSION}`,
    `go.temporal.io/server/cmd/tools/sql@v${TEMPORAL_SERVER_VERSION}`,
  ],
  binary: 'server',
  ldflags: '-s -w',
};
export const TEMPORAL_SQL_TOOL = 'sql';

/**
 * The Web UI's server, at the version the CLI v1.5.1 embeds. Newer ones need a newer Go than 1.26.8 (v2.56 and
 * later ask for 1.26.9 or more).
 */
export const TEMPORAL_UI_VERSION = '2.42.1';
export const TEMPORAL_UI: GoTool = {
  label: `the Temporal Web UI v${TEMPORAL_UI_VERSION}`,
  folder: 'temporal-ui',
  version: TEMPORAL_UI_VERSION,
  packages: [`github.com/temporalio/ui-server/v2/cmd/server@v${TEMPORAL_UI_VERSION}`],
  binary: 'server',
  ldflags: '-s -w',
};

/** Where Temporal keeps its state: two databases on a PostgreSQL server, beside Keel's own. */
export interface TemporalDatabase {
  host: string;
  port: number;
  user: string;
  password: string;
}

export const TEMPORAL_DATABASES = { history: 'temporal', visibility: 'temporal_visibility' } as const;

/** The server of a PostgreSQL URL (Keel's DATABASE_URL, or the embedded one's). */
export function temporalDatabaseOf(databaseUrl: string): TemporalDatabase {
  const u = new URL(databaseUrl);
  return {
    host: u.hostname,
    port: Number(u.port || 5432),
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
  };
}

/**
 * Creates Temporal's two databases if missing, then brings their schemas up to date with the SQL tool (its embedded
 * schemas, the ones of this server version). Safe to run at every start: existing versions are kept.
 */
export async function setUpTemporalSchemas(sqlTool: string, db: TemporalDatabase): Promise<void> {
  const admin = new pg.Client({
    host: db.host,
    port: db.port,
    user: db.user,
    password: db.password,
    database: 'postgres',
  });
  await admin.connect();
  try {
    await createDatabasesIfMissing(admin, Object.values(TEMPORAL_DATABASES));
  } finally {
    await admin.end();
  }
  const sql = (database: string, args: string[]) => {
    const connection = ['--ep', db.host, '-p', String(db.port), '-u', db.user, '--pl', 'postgres12', '--db', database];
    const run = spawnSync(sqlTool, ['-q', ...connection, ...args], {
      env: { ...process.env, SQL_PASSWORD: db.password },
      encoding: 'utf8',
    });
    if (run.status !== 0) {
      throw new Error(`temporal-sql-tool ${args[0]} on ${database} failed: ${(run.stderr || run.stdout).trim()}`);
    }
  };
  for (const [kind, database] of Object.entries(TEMPORAL_DATABASES)) {
    const schema = `postgresql/v12/${kind === 'history' ? 'temporal' : 'visibility'}`;
    sql(database, ['setup-schema', '-v', '0.0']);
    sql(database, ['update-schema', '-s', schema]);
  }
}

export interface TemporalServer {
  address: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

/** The ports the configuration derives from the frontend's and the membership base (keel-postgres.yaml). */
export interface TemporalServerPorts {
  frontend: number;
  /** Below 32768: Temporal stores membership ports as smallint. */
  membership: number;
}

export function temporalServerPorts(p: TemporalServerPorts): number[] {
  return [...[0, 1, 2, 6, 10].map((d) => p.frontend + d), ...[0, 1, 2, 6].map((d) => p.membership + d)];
}

/** npm run cluster's: upstream's, the membership base 300 below the frontend. */
export function defaultTemporalServerPorts(frontend: number): TemporalServerPorts {
  return { frontend, membership: frontend - 300 };
}

/** Starts the server and resolves once its frontend answers. The namespace is {@link registerNamespace}'s. */
export async function startTemporalServer(o: {
  binary: string;
  ports: TemporalServerPorts;
  db: TemporalDatabase;
  stdio: StdioOptions;
  shards?: number;
}): Promise<TemporalServer> {
  // Checked before the server starts: past it, the server would exit at start with a database error.
  if (o.ports.membership + 6 >= 32768) {
    throw new Error(`membership ports must stay below 32768 (Temporal stores them as smallint): ${o.ports.membership}`);
  }
  const config = path.join(REPO_ROOT, 'deploy', 'temporal');
  const { child, tail } = spawnKeepingTail(
    o.binary,
    ['-r', REPO_ROOT, '-c', 'deploy/temporal', '-e', 'keel-postgres', '--allow-no-auth', 'start'],
    {
      stdio: o.stdio,
      env: {
        ...process.env,
        TEMPORAL_FRONTEND_PORT: String(o.ports.frontend),
        TEMPORAL_MEMBERSHIP_PORT: String(o.ports.membership),
        TEMPORAL_DB_HOST: o.db.host,
        TEMPORAL_DB_PORT: String(o.db.port),
        TEMPORAL_DB_USER: o.db.user,
        TEMPORAL_DB_PASSWORD: o.db.password,
        TEMPORAL_DYNAMIC_CONFIG: path.join(config, 'dynamicconfig.yaml'),
        ...(o.shards ? { TEMPORAL_NUM_HISTORY_SHARDS: String(o.shards) } : {}),
      },
    },
  );
  const address = `127.0.0.1:${o.ports.frontend}`;
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code, signal) => reject(exitedEarly('the Temporal server', code, signal, tail))),
  );
  exited.catch(() => undefined);
  const stop = () => stopProcess(child, 20_000);
  try {
    await Promise.race([waitForTemporal(address, 120_000, null), exited]);
  } catch (err) {
    await stop();
    throw err;
  }
  return { address, process: child, stop };
}

/**
 * The namespace Keel runs in, registered if missing (the dev server makes it from its flags), then Keel's search
 * attributes, as the worker and the API also ensure at their start.
 */
export async function registerNamespace(address: string, namespace: string): Promise<void> {
  const connection = await Connection.connect({ address });
  try {
    const known = await connection.workflowService.describeNamespace({ namespace }).then(
      () => true,
      () => false,
    );
    if (!known) {
      await connection.workflowService.registerNamespace({
        namespace,
        // Three days of closed runs, to inspect and replay (the dev server keeps one).
        workflowExecutionRetentionPeriod: msToTs('3 days'),
      });
    }
    // A new namespace takes a moment to reach every service.
    for (let tries = 1; ; tries++) {
      try {
        await ensureSearchAttributes(connection, namespace);
        return;
      } catch (err) {
        if (tries >= 60) throw err;
        await new Promise((r) => setTimeout(r, 1_000));
      }
    }
  } finally {
    await connection.close();
  }
}

/** The Web UI's server, pointed at the frontend (deploy/temporal/ui.yaml); resolves once it serves its page. */
export async function startTemporalUi(o: {
  binary: string;
  port: number;
  temporalAddress: string;
  /** The codec server the UI decodes payloads through, sending the operator's cookie with each call. */
  codecEndpoint?: string;
  stdio: StdioOptions;
}): Promise<{ url: string; process: ChildProcess; stop(): Promise<void> }> {
  const child = spawn(o.binary, ['-r', REPO_ROOT, '-c', 'deploy/temporal', '-e', 'ui', 'start'], {
    stdio: o.stdio,
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: o.temporalAddress,
      TEMPORAL_UI_PORT: String(o.port),
      TEMPORAL_UI_CODEC_ENDPOINT: o.codecEndpoint ?? '',
    },
  });
  const url = `http://127.0.0.1:${o.port}`;
  const stop = () => stopProcess(child, 10_000);
  const deadline = Date.now() + 30_000;
  while (
    !(await fetch(url).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (child.exitCode !== null) throw new Error(`the Web UI exited (code ${child.exitCode}); see its output above`);
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`the Web UI did not answer at ${url} in 30 s`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return { url, process: child, stop };
}
