/**
 * npm run record-histories: records real histories of every workflow type into test/histories, for `npm test` to
 * replay against the current workflow code. It overwrites only the files it records: histories of older shapes
 * (`*-before-*.json`, recorded by earlier code) stay, so that runs begun before a change are still checked. It runs
 * its own Temporal dev server (suggesting continue-as-new after 60 events), an embedded PostgreSQL, a worker and the
 * API, all on free ports, and drives them with the scripted model.
 */
import { randomUUID } from 'node:crypto';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { scriptedProvider } from '../worker/wiring';
import { noneTransport } from '../adapters/delivery/none';
import { slackTransport } from '../adapters/delivery/slack';
import { webhookTransport } from '../adapters/delivery/webhook';
import { buildApi } from '../api/server';
import { migrate } from '../db/migrate';
import { createPool } from '../db/pool';
import {
  conversationWorkflowId,
  delegateWorkflowId,
  deletionWorkflowId,
  evalCaseWorkflowId,
  evalWorkflowId,
  reflectionWorkflowId,
} from '../domain/ids';
import { DEFAULT_REFLECTION_SETTINGS } from '../domain/reflection';
import { DEFAULT_ROUTINE_SETTINGS } from '../domain/routines';
import { DEFAULT_JOB_SETTINGS } from '../services/job-settings';
import { acceptMessage } from '../services/conversation-turn';
import { fetchHistory, historyJson } from '../services/run-history';
import { payloadEncryption } from '../services/payload-encryption';
import { newSecretKey } from '../services/secrets';
import { createKeelWorker } from '../worker/worker';
import { startDevServer } from './dev-server';
import { freePort } from './ports';
import { startPostgresOnFreePort } from './postgres-process';
import { createEgressGuard } from '../adapters/egress';
import { parseEgressAllow } from '../domain/egress';
import { startShopHttp } from '../test/support/mcp-shop';

const OUT = path.resolve(__dirname, '..', 'test', 'histories');

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const workDir = await mkdtemp(path.join(os.tmpdir(), 'keel-record-'));
  await chmod(workDir, 0o755);
  const temporal = await startDevServer({
    port: await freePort(),
    stdio: 'ignore',
    extraArgs: ['--dynamic-config-value', 'limit.historyCount.suggestContinueAsNew=60'],
  });
  const pg = await startPostgresOnFreePort(path.join(workDir, 'pg'));
  await migrate(pg.url);
  const pool = createPool(pg.url);
  const connection = await Connection.connect({ address: temporal.address });
  // Recorded as Keel runs, with its payloads sealed; kept decoded (fetchHistory), so they replay without the key.
  const { dataConverter } = payloadEncryption({ keys: newSecretKey('record'), production: false }, 'recording');
  const client = new Client({ connection, dataConverter });
  const taskQueue = 'record';
  const jobs = { ...DEFAULT_JOB_SETTINGS, backoffMs: [300, 300, 300, 300, 300] };
  // Short, so that a conversation closes idle within the recording (and a busy one never does).
  const conversationIdleMs = 3_000;
  // The recording's webhooks (if any) go to this machine: loopback is allowed, nothing else.
  const egress = createEgressGuard({ allow: parseEgressAllow('loopback') });
  const api = await buildApi({
    pool,
    temporal: client,
    taskQueue,
    tokens: undefined,
    jobs,
    conversationIdleMs,
    egressAllow: egress.allow,
  });
  const native = await NativeConnection.connect({ address: temporal.address });
  const worker = await createKeelWorker({
    connection: native,
    namespace: 'default',
    taskQueue,
    dataConverter,
    deps: {
      pool,
      provider: scriptedProvider(pool),
      defaultModel: 'scripted',
      transports: { none: noneTransport(), webhook: webhookTransport({ egress }), slack: slackTransport({ egress }) },
      egress,
      jobs,
      routines: DEFAULT_ROUTINE_SETTINGS,
      reflection: { ...DEFAULT_REFLECTION_SETTINGS, drainAtQueued: 1, approvalFiles: [] },
      conversationIdleMs,
    },
  });
  const running = worker.run();
  const shop = await startShopHttp();

  const call = async <T>(method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, body?: unknown): Promise<T> => {
    const res = await api.inject({
      method,
      url,
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) }),
    });
    if (res.statusCode >= 400) throw new Error(`${method} ${url}: ${res.statusCode} ${res.body}`);
    return res.json<T>();
  };
  const until = async <T>(what: string, check: () => Promise<T | undefined | false>): Promise<T> => {
    for (const deadline = Date.now() + 120_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
      const v = await check();
      if (v !== undefined && v !== false) return v;
    }
    throw new Error(`timed out waiting for ${what}`);
  };
  const say = (a: string, c: string, text: string) =>
    call<{ status: string; reply?: { text: string } }>('POST', `/v1/agents/${a}/conversations/${c}/messages?wait=30`, {
      text,
    });
  /** The run id of the workflow's latest run once it has completed. */
  const closed = async (workflowId: string) => {
    const d = await client.workflow.getHandle(workflowId).describe();
    return d.status.name === 'COMPLETED' && d.runId;
  };
  const save = async (name: string, workflowId: string, runId?: string) => {
    const { history } = await fetchHistory(client, workflowId, runId);
    await writeFile(path.join(OUT, `${name}.json`), `${historyJson.stringify(history)}\n`);
    console.log(`recorded ${name}.json (${history.events?.length ?? 0} events) from ${workflowId}`);
  };

  try {
    await mkdir(OUT, { recursive: true });

    // A conversation with tool calls that continues as new: every run of it.
    const conv = conversationWorkflowId('rec', 'c1');
    await say('rec', 'c1', '/tool schedule {"action":"list"}');
    const runsOf = async () => {
      const runs: string[] = [];
      for await (const w of client.workflow.list({ query: `WorkflowId = '${conv}'` })) runs.push(w.runId);
      return runs.reverse(); // oldest first
    };
    for (let i = 0; (await runsOf()).length < 2; i++) {
      if (i === 30) throw new Error('the conversation did not continue as new');
      await say('rec', 'c1', `turn ${i}`);
    }
    await say('rec', 'c1', 'after continue-as-new');
    // The first run (it ends in continue-as-new) and the one that took over.
    for (const [i, runId] of (await runsOf()).slice(0, 2).entries())
      await save(`conversation-run${i + 1}`, conv, runId);

    // A delegate that runs out of wall clock.
    await call('POST', '/v1/agents/rec/tasks', {
      title: 'Slow task',
      description: '/work 20 1000 never finishes in time',
      status: 'ready',
      wallClockSeconds: 3,
    });
    const spawned = await say('rec', 'c2', '/tool spawn_delegate {"task":1}');
    const delegateId = /spawned delegate (\S+)/.exec(spawned.reply?.text ?? '')?.[1];
    if (!delegateId) throw new Error(`no delegate spawned: ${spawned.reply?.text}`);
    await until(
      'the delegate to time out',
      async () =>
        (await call<{ outcome?: { kind: string } }>('GET', `/v1/agents/rec/delegates/${delegateId}`)).outcome?.kind ===
        'timeout',
    );
    await save('delegate-timeout', delegateWorkflowId('rec', delegateId));
    // Open while its delegate was out; closed idle once the result was relayed.
    await until('the delegate conversation to close idle', () => closed(conversationWorkflowId('rec', 'c2')));
    await save('conversation-with-delegate', conversationWorkflowId('rec', 'c2'));

    // A conversation that closes idle, and the run its next message starts.
    const idle = conversationWorkflowId('rec', 'c3');
    await say('rec', 'c3', 'hello');
    const firstRun = await until('the conversation to close idle', () => closed(idle));
    await say('rec', 'c3', 'hello again');
    await save('conversation-idle-closed', idle, firstRun);
    await until('the woken conversation to close idle', () => closed(idle));
    await save('conversation-woken', idle);

    // A run started by a message whose later neighbour PostgreSQL already has open, not yet handed over: it runs
    // both in their order of acceptance (OPEN_TURNS_IN_ORDER_PATCH).
    const ordered = conversationWorkflowId('rec', 'c6');
    for (const [messageId, text] of [
      ['c6-m1', 'first'],
      ['c6-m2', 'second'],
    ]) {
      const message = { messageId: messageId!, text: text!, mode: 'queue' as const };
      const record = { conversationKey: ordered, agentId: 'rec', conversationId: 'c6', turnId: randomUUID() };
      await acceptMessage({ pool }, { ...record, message, startsTurn: true });
    }
    await call('POST', '/v1/agents/rec/conversations/c6/messages', { text: 'first', messageId: 'c6-m1' });
    await save('conversation-open-turns-in-order', ordered, await until('it to close idle', () => closed(ordered)));

    // A conversation that calls a tool server's tools: one at once, one after a person's approval (issue 26).
    await call('PUT', '/v1/agents/rec/tool-servers/shop', { url: shop.url });
    await say('rec', 'c5', '/tool shop__lookup_order {"orderId":"A1"}');
    const refund = await call<{ turnId: string }>('POST', '/v1/agents/rec/conversations/c5/messages', {
      text: '/tool shop__refund {"orderId":"A1","amount":5}',
    });
    const refundWaiting = await until('the refund to wait for approval', async () =>
      (await call<{ items: { approve: { path: string } }[] }>('GET', '/v1/agents/rec/approvals')).items.at(0),
    );
    await call('POST', refundWaiting.approve.path, {});
    await until('the approved refund to be answered', async () =>
      (
        await call<{ messages: { turnId: string | null; role: string }[] }>('GET', '/v1/agents/rec/conversations/c5')
      ).messages.some((m) => m.turnId === refund.turnId && m.role === 'tool'),
    );
    const toolConversation = conversationWorkflowId('rec', 'c5');
    await until('the tool conversation to close idle', () => closed(toolConversation));
    // The runs that made the calls, oldest first (with this server's short limit it continues as new after a turn).
    const toolRuns: string[] = [];
    const toolQuery = `WorkflowId = '${toolConversation}'`;
    for await (const w of client.workflow.list({ query: toolQuery })) toolRuns.unshift(w.runId);
    await save('conversation-tool-calls', toolConversation, toolRuns[0]);
    await save('conversation-tool-approval', toolConversation, toolRuns[1]);

    // A job run whose first attempt fails and whose retry succeeds.
    const job = await call<{ id: string }>('POST', '/v1/agents/rec/jobs', {
      name: 'flaky',
      schedule: { kind: 'every', intervalMs: 3_600_000 },
      task: '/error 1 flaky job',
    });
    await call('POST', `/v1/agents/rec/jobs/${job.id}/run`);
    const jobRun = await until('the job run', async () =>
      (await call<{ runId: string; status: string }[]>('GET', `/v1/agents/rec/jobs/${job.id}/runs`)).find(
        (r) => r.status === 'ok',
      ),
    );
    await save('job-run-retried', jobRun.runId);

    // A job run a budget stops: it waits for the agent's budgets to change, then goes on and ends ok.
    await call('PUT', '/v1/agents/spend', { name: 'spend', budgets: { perJobRunUsd: 0.001 } });
    const capped = await call<{ id: string }>('POST', '/v1/agents/spend/jobs', {
      name: 'capped',
      schedule: { kind: 'every', intervalMs: 3_600_000 },
      task: 'digest',
    });
    await call('POST', `/v1/agents/spend/jobs/${capped.id}/run`);
    const cappedRuns = () =>
      call<{ runId: string; status: string; budgetBlocked?: string }[]>(
        'GET',
        `/v1/agents/spend/jobs/${capped.id}/runs`,
      );
    await until('the job run to wait for a budget', async () => (await cappedRuns()).some((r) => r.budgetBlocked));
    await call('PUT', '/v1/agents/spend', { name: 'spend', budgets: { perJobRunUsd: 0.5 } });
    const waited = await until('the raised job run', async () => (await cappedRuns()).find((r) => r.status === 'ok'));
    await save('job-run-budget-waited', waited.runId);

    // A routine run that authors its tool, stops at the send gate and resumes after approval.
    await call('PUT', '/v1/agents/rec/apps/crm', { name: 'CRM', tables: [{ name: 'leads', columns: ['name'] }] });
    await call('POST', '/v1/agents/rec/apps/crm/tables/leads/records', { id: 'l1', name: 'Ada' });
    const tool = {
      name: 'greetAda',
      inputs: ['input'],
      code:
        "async function greetAda() { const ada = await data.get('leads', 'l1'); " +
        "await send('Hello ' + ada.name); return 'greeted ' + ada.name; }",
    };
    await call('PUT', '/v1/agents/rec/apps/crm/routines/greet', {
      label: 'Greet',
      schedule: { expr: 'daily' },
      prompt: `Greet Ada /author ${JSON.stringify(tool)}`,
    });
    await call('POST', '/v1/agents/rec/apps/crm/routines/greet/run');
    const waiting = await until('the gate', async () =>
      (
        await call<{ runId: string; workflowId: string; status: string }[]>(
          'GET',
          '/v1/agents/rec/apps/crm/routines/greet/runs',
        )
      ).find((r) => r.status === 'needs_approval'),
    );
    await call('POST', `/v1/agents/rec/routine-runs/${waiting.runId}/approve`, {});
    await until('the approved run', async () =>
      (await call<{ runId: string; status: string }[]>('GET', '/v1/agents/rec/apps/crm/routines/greet/runs')).some(
        (r) => r.runId === waiting.runId && r.status === 'ok',
      ),
    );
    await save('routine-run-approved', waiting.workflowId, waiting.runId);

    // A reflection drain that admits a proposal.
    await call('PUT', '/v1/agents/refl', { name: 'refl', reflection: { enabled: true } });
    const proposal = {
      status: 'ok',
      edits: [
        {
          file: 'user-profile.md',
          action: 'edit',
          content: '# User profile\n\n- likes tea\n',
          summary: 'tea',
          rationale: 'said so',
        },
      ],
    };
    await say('refl', 'c1', `/propose ${JSON.stringify(proposal)}`);
    await until('the admitted proposal', async () =>
      (await call<{ status: string }[]>('GET', '/v1/agents/refl/proposals')).some((p) => p.status === 'admitted'),
    );
    await save('reflection-drain', reflectionWorkflowId('refl'));

    // An evaluation replaying the conversation that continued as new, its case a child.
    const evaluation = await call<{ id: string }>('POST', '/v1/agents/rec/evals', {
      mode: 'replay',
      recorded: { conversationIds: ['c1'] },
    });
    await until('the evaluation', async () => {
      const e = await call<{ status: string }>('GET', `/v1/agents/rec/evals/${evaluation.id}`);
      return e.status !== 'running';
    });
    await save('eval-replay', evalWorkflowId('rec', evaluation.id));
    await save('eval-case-replay', evalCaseWorkflowId('rec', evaluation.id, 1));

    // A conversation's deletion.
    await say('rec', 'c9', 'to be deleted');
    const deletion = await call<{ deletionId: string }>('DELETE', '/v1/agents/rec/conversations/c9');
    await until('the deletion', async () => {
      const d = await call<{ status: string }>('GET', `/v1/agents/rec/deletions/${deletion.deletionId}`);
      return d.status !== 'running';
    });
    await save('deletion-conversation', deletionWorkflowId('rec', deletion.deletionId));
  } finally {
    worker.shutdown();
    await running;
    await native.close();
    await api.close();
    await connection.close();
    await pool.end();
    await Promise.all([temporal.stop(), pg.stop(), shop.close()]);
    await rm(workDir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
