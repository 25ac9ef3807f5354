import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { Client, Connection } from '@temporalio/client';
import { startWebhookReceiver } from './support/webhook-receiver';
import { payloadEncryption } from '../services/payload-encryption';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../scripts/processes';
import { freePort, portOpen } from '../scripts/ports';
import { eventually } from './support/keel';
import { describeTemporalCli, ensureTemporalCli } from '../scripts/temporal-cli';

describe('npm start', () => {
  it('starts Temporal, PostgreSQL, worker and API at once; the README request answers; Ctrl-C stops all', async () => {
    const SECRET = 'start-webhook-secret-5c1e0a';
    // Private (mode 700), like a checkout in root's home folder: as root, the postgres user cannot enter it, so the
    // cluster's data goes to the runtime folder (and the binaries too, when the checkout is just as private).
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'keel-start-'));
    const runtimeDir = await mkdtemp(path.join(os.tmpdir(), 'keel-start-runtime-'));
    await chmod(runtimeDir, 0o755);
    let temporalPort = await freePort();
    while (!(await portIsFree(temporalPort + 1000))) temporalPort = await freePort();
    const [apiPort, pgPort] = [await freePort(), await freePort()];
    const otlp = await startOtlpReceiver();
    const child = spawn('npm', ['start'], {
      cwd: REPO_ROOT,
      detached: true, // its own process group, so the test can send Ctrl-C to all of it
      stdio: ['ignore', 'pipe', 'inherit'],
      env: {
        ...process.env,
        KEEL_DATA_DIR: dataDir,
        TEMPORAL_ADDRESS: `127.0.0.1:${temporalPort}`,
        KEEL_API_PORT: String(apiPort),
        KEEL_EMBEDDED_PG_PORT: String(pgPort),
        KEEL_PG_RUNTIME_DIR: runtimeDir,
        KEEL_MODEL: '',
        ANTHROPIC_API_KEY: '',
        DATABASE_URL: '',
        KEEL_LOG_LEVEL: 'info',
        // Traces go to this test's OTLP receiver, flushed every 200 ms.
        OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
        OTEL_BSP_SCHEDULE_DELAY: '200',
      },
    });
    const output: string[] = [];
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    // stdout is shared by every process npm start runs: it closes only when all of them have exited.
    const allClosed = new Promise<void>((resolve) => child.stdout.once('close', () => resolve()));
    try {
      await new Promise<void>((resolve, reject) => {
        createInterface({ input: child.stdout }).on('line', (line) => {
          output.push(line);
          if (line.startsWith('Keel is running.')) resolve();
        });
        void exited.then((code) => reject(new Error(`npm start exited (${code}):\n${output.join('\n')}`)));
      });
      expect(output.join('\n')).toMatch(/Model\s+scripted \(offline/);
      // The banner says where PostgreSQL's data is, and why there.
      const pgLine = output.find((l) => /^\s+PostgreSQL\s/.test(l)) ?? '';
      if (os.userInfo().uid === 0) {
        expect(pgLine).toContain(`embedded, ${runtimeDir}/data/`);
        expect(pgLine).toContain(`instead of ${dataDir}/postgres, which the postgres user cannot enter`);
      } else {
        expect(pgLine).toContain(`embedded, ${dataDir}/postgres`);
      }
      expect(output.join('\n')).toContain(`http://127.0.0.1:${temporalPort + 1000}`);
      // Which CLI runs the dev server, and which way Keel got it (here: the one this test run found already).
      expect(output).toContain(`  Temporal CLI ${describeTemporalCli(await ensureTemporalCli())}`);
      // The banner is the last thing printed while starting: nothing after its last line until a request comes.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const bannerEnd = output.indexOf('Ctrl-C stops everything.');
      expect(bannerEnd).toBeGreaterThan(0);
      expect(output.slice(bannerEnd + 1).filter((l) => l.trim())).toEqual([]);

      const res = await fetch(`http://127.0.0.1:${apiPort}/v1/agents/a1/conversations/c1/messages?wait=30`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'hello' }),
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { reply: { text: string } }).reply.text).toBe('echo: hello');
      // A webhook secret goes through the API and the worker, signs the delivery, and is in no line either prints
      // (checked once all have stopped).
      const receiver = await startWebhookReceiver({ secret: SECRET });
      const signed = await fetch(`http://127.0.0.1:${apiPort}/v1/agents/a1/conversations/c2/messages?wait=30`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ text: 'hello', delivery: { channel: 'webhook', url: receiver.url, secret: SECRET } }),
      });
      await receiver.close();
      expect(signed.status).toBe(200);
      expect(((await signed.json()) as { reply: { delivery: { outcome: string } } }).reply.delivery.outcome).toBe(
        'delivered',
      );
      expect(receiver.received.map((r) => r.validSignature)).toEqual([true]);

      const ui = await fetch(`http://127.0.0.1:${temporalPort + 1000}/`);
      expect(ui.status).toBe(200);
      expect(await ui.text()).toMatch(/<html/i);
      // npm start sealed the payloads with the development key it made: a client reads them with that key.
      const keyFile = path.join(dataDir, 'payloads.key');
      expect(output.join('\n')).toContain(`Payloads     sealed with the key in ${keyFile} (development;`);
      const { dataConverter } = payloadEncryption(
        { keys: readFileSync(keyFile, 'utf8').trim(), production: false },
        't',
      );
      const connection = await Connection.connect({ address: `127.0.0.1:${temporalPort}` });
      const ids: string[] = [];
      const client = new Client({ connection, dataConverter });
      for await (const w of client.workflow.list({ query: `WorkflowId = 'conv:a1:c1'` })) ids.push(w.workflowId);
      await connection.close();
      expect(ids).toEqual(['conv:a1:c1']);

      // The turn's log line names its workflow; /metrics has Keel's totals and the Temporal worker's own series. The
      // worker's log comes through the SDK's collector, which orders its lines with core's (up to 200 ms later).
      const turnLog = await eventually(
        async () =>
          output
            .map((l) => (l.startsWith('{') ? (JSON.parse(l) as Record<string, unknown>) : {}))
            .find((l) => l.msg === 'turn finished'),
        10_000,
        'the worker to log the finished turn',
      );
      expect(turnLog).toMatchObject({
        workflowId: 'conv:a1:c1',
        workflowType: 'conversationWorkflow',
        status: 'replied',
        service: 'keel-worker',
      });
      expect(turnLog?.workflowRunId).toEqual(expect.any(String));
      const metrics = await (await fetch(`http://127.0.0.1:${apiPort}/metrics`)).text();
      expect(metrics).toMatch(/^keel_turns_total\{status="replied"\} 2$/m);
      for (const series of [
        'keel_model_calls_total',
        'keel_model_tokens_total',
        'keel_deliveries_total',
        'keel_job_runs_total',
        'keel_routine_runs_total',
        'keel_delegate_outcomes_total',
        'keel_api_process_cpu_seconds_total',
      ]) {
        expect(metrics).toContain(`# TYPE ${series}`);
      }
      expect(metrics).toMatch(/^temporal_\w+/m);

      // One trace from the API's submission through the workflow to the model call's activity on the worker.
      const traced = await waitFor(() => {
        const call = otlp.spans.find((sp) => sp.service === 'keel-worker' && sp.name === 'RunActivity:callTurnModel');
        const submit = call && otlp.spans.find((sp) => sp.service === 'keel-api' && sp.traceId === call.traceId);
        return call && submit ? { call, submit } : undefined;
      });
      expect(traced.submit.name).toMatch(/Workflow/);
    } finally {
      process.kill(-child.pid!, 'SIGINT');
      otlp.close();
    }
    await allClosed;
    expect(output[output.length - 1]).toBe('keel: stopped.');
    expect(output.join('\n')).not.toContain(SECRET);
    // Requests are logged at debug only, and /healthz (polled while starting) never.
    expect(
      output.filter((l) => l.includes('/healthz') || /"msg":"(incoming request|request completed)"/.test(l)),
    ).toEqual([]);
    expect(await portOpen(apiPort)).toBe(false);
    expect(await portOpen(temporalPort)).toBe(false);
    expect(await portOpen(pgPort)).toBe(false);
    await rm(dataDir, { recursive: true, force: true });
    await rm(runtimeDir, { recursive: true, force: true });
  });
});

interface ReceivedSpan {
  service: string;
  name: string;
  traceId: string;
}

/** A minimal OTLP/HTTP (JSON) trace receiver: what a collector would get from Keel. */
async function startOtlpReceiver(): Promise<{ url: string; spans: ReceivedSpan[]; close(): void }> {
  type Attr = { key: string; value: { stringValue?: string } };
  type Body = {
    resourceSpans?: {
      resource?: { attributes?: Attr[] };
      scopeSpans?: { spans?: { name: string; traceId: string }[] }[];
    }[];
  };
  const spans: ReceivedSpan[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Body;
      for (const rs of body.resourceSpans ?? []) {
        const service = rs.resource?.attributes?.find((a) => a.key === 'service.name')?.value.stringValue ?? '';
        for (const ss of rs.scopeSpans ?? [])
          for (const sp of ss.spans ?? []) spans.push({ service, name: sp.name, traceId: sp.traceId });
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${port}`, spans, close: () => server.close() };
}

async function waitFor<T>(probe: () => T | undefined, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = probe();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error('timed out waiting for the condition');
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function portIsFree(port: number): Promise<boolean> {
  return !(await portOpen(port));
}
