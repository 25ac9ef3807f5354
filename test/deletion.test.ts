import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { noneTransport } from '../adapters/delivery/none';
import { slackTransport } from '../adapters/delivery/slack';
import { webhookTransport } from '../adapters/delivery/webhook';
import { stopProcess } from '../scripts/processes';
import { deliverReply } from '../services/delivery';
import { conversationWorkflowId, deletionWorkflowId, jobScheduleId } from '../domain/ids';
import { loopbackEgress } from './support/egress';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { author, CONTACT_ADA, routineApi } from './support/routines';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';
import { endedEval } from './support/evals';
import { finishedDeletion, rowsMentioning, type Deletion } from './support/deletions';
import { startWorkerProcess, waitForPollers } from './support/workers';

/**
 * Deleting a conversation or an agent: a workflow ends what runs, erases what was kept and records who did it. Nothing
 * of the content remains in PostgreSQL but the effects ledger's keys (without their requests) and the audit trail.
 */
const receivers: WebhookReceiver[] = [];
afterAll(async () => Promise.all(receivers.map((r) => r.close())));

async function receiver(opts: Parameters<typeof startWebhookReceiver>[0] = {}): Promise<WebhookReceiver> {
  const r = await startWebhookReceiver(opts);
  receivers.push(r);
  return r;
}

async function openWorkflowsOf(keel: TestKeel, agentId: string): Promise<string[]> {
  const ids: string[] = [];
  const query = `KeelAgentId = '${agentId}' AND ExecutionStatus = 'Running'`;
  for await (const w of keel.client.workflow.list({ query })) ids.push(w.workflowId);
  return ids;
}

describe('deleting a conversation', () => {
  let keel: TestKeel;
  beforeAll(async () => {
    keel = await startTestKeel();
  });
  afterAll(async () => keel?.stop());

  it('ends its workflow, erases what it kept, keeps ledger keys and the audit trail, leaves the rest', async () => {
    const [agent, gone, kept] = [uniqueId('a'), uniqueId('c'), uniqueId('c')];
    const marker = uniqueId('words-to-forget');
    const hook = await receiver();
    for (const text of [`${marker} one`, `${marker} two`]) {
      const answer = await keel.post(
        agent,
        gone,
        { text, delivery: { channel: 'webhook', url: hook.url } },
        { wait: 30 },
      );
      expect(answer.body.reply?.delivery.outcome).toBe('delivered');
    }
    await keel.post(agent, kept, { text: 'stay' }, { wait: 30 });
    // An evaluation and a fork copy its turns: they go with it.
    const evaluation = await keel.call<{ id: string }>('POST', `/v1/agents/${agent}/evals`, {
      mode: 'replay',
      recorded: { conversationIds: [gone] },
    });
    expect(evaluation.status, evaluation.raw).toBe(202);
    expect((await endedEval(keel, agent, evaluation.body.id)).status).toBe('finished');
    const fork = await keel.call('POST', `/v1/agents/${agent}/conversations/${gone}/forks`, { atTurn: 1 });
    expect(fork.status, fork.raw).toBe(201);
    expect(Object.keys(await rowsMentioning(keel.pool, marker))).toEqual(
      expect.arrayContaining(['messages', 'inbound_messages', 'effects', 'deliveries', 'eval_cases']),
    );

    const asked = await keel.call<Deletion>('DELETE', `/v1/agents/${agent}/conversations/${gone}`);
    expect(asked.status).toBe(202);
    expect(asked.body).toMatchObject({ agentId: agent, conversationId: gone, status: 'running', outcome: null });
    const done = await finishedDeletion(keel, agent, asked.body.deletionId);
    expect(done).toMatchObject({ status: 'finished', conversationId: gone, outcome: { conversations: 2 } });

    // Gone from the API, from PostgreSQL (but the ledger's keys) and from Temporal's open workflows.
    expect((await keel.call('GET', `/v1/agents/${agent}/conversations/${gone}`)).status).toBe(404);
    const list = await keel.call<{ items: { conversationId: string }[] }>('GET', `/v1/agents/${agent}/conversations`);
    expect(list.body.items.map((c) => c.conversationId)).toEqual([kept]);
    expect(await rowsMentioning(keel.pool, marker)).toEqual({});
    const key = conversationWorkflowId(agent, gone);
    const { rows: ledger } = await keel.pool.query<{ status: string; request: unknown }>(
      'SELECT status, request FROM effects WHERE starts_with(key, $1) ORDER BY key',
      [`${key}/`],
    );
    expect(ledger).toEqual([
      { status: 'done', request: {} },
      { status: 'done', request: {} },
    ]);
    const described = await keel.client.workflow.getHandle(key).describe();
    expect(described.status.name).not.toBe('RUNNING');

    // The trail says who deleted what and when; the other conversation still answers.
    const trail = await keel.call<{ entries: { action: string; subject: string; actor: string; detail: unknown }[] }>(
      'GET',
      `/v1/agents/${agent}/audit`,
    );
    const deletions = trail.body.entries.filter((e) => e.action === 'conversation.delete');
    expect(deletions.map((e) => [e.subject, e.actor, (e.detail as { phase: string }).phase])).toEqual([
      [gone, 'dev', 'finished'],
      [gone, 'dev', 'requested'],
    ]);
    expect((await keel.post(agent, kept, { text: 'still here' }, { wait: 30 })).body.reply?.text).toBe(
      'echo: still here',
    );
  });

  it('answers 404 for a conversation that is not there, and for a deletion it never started', async () => {
    const agent = uniqueId('a');
    expect((await keel.call('DELETE', `/v1/agents/${agent}/conversations/nope`)).status).toBe(404);
    const unknown = '00000000-0000-4000-8000-000000000000';
    expect((await keel.call('GET', `/v1/agents/${agent}/deletions/${unknown}`)).status).toBe(404);
  });
});

describe('deleting an agent', () => {
  let keel: TestKeel;
  const workers: ChildProcess[] = [];
  beforeAll(async () => {
    keel = await startTestKeel({ worker: false });
  });
  afterAll(async () => {
    for (const w of workers) if (w.exitCode === null && w.signalCode === null) await stopProcess(w);
    await keel?.stop();
  });

  it('removes all it owns, its worker killed halfway; a delivery retried after it never sends', async () => {
    const agent = uniqueId('a');
    const first = startWorkerProcess(keel, inject('databaseUrl'));
    workers.push(first);
    await waitForPollers(keel, [first]);
    const owner = await receiver();
    // A receiver that refuses every request: the reply's delivery is retried, with backoff, until the deletion.
    const refusing = await receiver({ failFirst: 1_000, failStatus: 503 });
    expect(
      (
        await keel.call('PUT', `/v1/agents/${agent}`, {
          name: agent,
          owner: { delivery: { channel: 'webhook', url: owner.url, secret: 'agent-owner-secret' } },
        })
      ).status,
    ).toBe(200);

    // A conversation whose reply keeps failing to deliver, and one that spawned a delegate still at work.
    await keel.post(agent, 'c1', { text: 'hello', delivery: { channel: 'webhook', url: refusing.url } });
    await refusing.waitFor((got) => got.length >= 2, 60_000);
    const { rows: pendingRows } = await keel.pool.query<{
      effectKey: string;
      conversationKey: string;
      turnId: string;
      text: string;
    }>(
      `SELECT d.effect_key AS "effectKey", d.conversation_key AS "conversationKey", d.turn_id AS "turnId", d.text
         FROM deliveries d JOIN effects e ON e.key = d.effect_key
        WHERE d.conversation_key = $1 AND e.status = 'pending'`,
      [conversationWorkflowId(agent, 'c1')],
    );
    const pending = pendingRows[0] && { ...pendingRows[0], replySeq: 1 };
    expect(pending?.text).toBe('echo: hello');
    const spawned = await keel.post(
      agent,
      'c2',
      { text: '/tool spawn_delegate {"text":"/delay 600000 still working","historyMode":"clean"}' },
      { wait: 60 },
    );
    expect(spawned.body.reply?.text).toMatch(/spawned delegate/);
    // A job (its Schedule), memory versions (a rollback makes the second), a routine run waiting for approval.
    const job = await keel.call<{ id: string }>('POST', `/v1/agents/${agent}/jobs`, {
      name: 'digest',
      schedule: { kind: 'every', intervalMs: 3_600_000 },
      task: 'digest',
    });
    expect(job.status).toBe(201);
    expect((await keel.call('POST', `/v1/agents/${agent}/memory/rollback`, { toVersion: 1 })).status).toBe(200);
    const r = routineApi(() => keel);
    await r.app(agent, 'crm', [{ id: 'l1', name: 'Ada', email: 'ada@example.com', touches: '0' }]);
    await r.routine(agent, 'crm', 'contact', { label: 'Contact Ada', prompt: `Contact Ada ${author(CONTACT_ADA)}` });
    await r.runNow(agent, 'crm', 'contact', (x) => x.status === 'needs_approval');
    expect((await openWorkflowsOf(keel, agent)).length).toBeGreaterThanOrEqual(3);

    const asked = await keel.call<Deletion>('DELETE', `/v1/agents/${agent}`);
    expect(asked.status).toBe(202);
    // Killed as the deletion is under way: once its first step has ended the agent's work.
    const workflowId = deletionWorkflowId(agent, asked.body.deletionId);
    await eventually(async () => {
      const history = await keel.client.workflow.getHandle(workflowId).fetchHistory();
      return (history.events ?? []).some((e) => e.activityTaskCompletedEventAttributes);
    }, 60_000);
    first.kill('SIGKILL');
    const second = startWorkerProcess(keel, inject('databaseUrl'));
    workers.push(second);
    const done = await finishedDeletion(keel, agent, asked.body.deletionId);
    expect(done.status).toBe('finished');
    expect(done.outcome!.schedulesDeleted).toBe(2);
    const refusedBy = refusing.received.length;

    // Nothing of the agent's in PostgreSQL but its audit trail and its ledger keys, which hold no request.
    const left = await rowsMentioning(keel.pool, agent);
    expect(Object.keys(left).sort()).toEqual(['audit_trail', 'effects']);
    const { rows: requests } = await keel.pool.query<{ request: unknown }>(
      `SELECT DISTINCT request FROM effects x WHERE strpos(x::text, $1) > 0`,
      [agent],
    );
    expect(requests).toEqual([{ request: {} }]);
    // Nor in Temporal: no Schedule, no open workflow.
    await expect(keel.client.schedule.getHandle(jobScheduleId(job.body.id)).describe()).rejects.toThrow(/not found/i);
    await eventually(async () => (await openWorkflowsOf(keel, agent)).length === 0, 30_000, 'no open workflow');
    // The trail records the deletion; the agent is not there, as one never used is not.
    const trail = await keel.call<{ entries: { action: string; detail: unknown }[] }>(
      'GET',
      `/v1/agents/${agent}/audit`,
    );
    expect(trail.body.entries.filter((e) => e.action === 'agent.delete')).toHaveLength(2);
    expect((await keel.call('GET', `/v1/agents/${agent}`)).status).toBe(404);

    // The refused reply's delivery, retried after the deletion as a late attempt would be, with its own key and
    // input: nothing is sent, and it says why.
    const transports = {
      none: noneTransport(),
      webhook: webhookTransport({ egress: loopbackEgress }),
      slack: slackTransport({ egress: loopbackEgress }),
    };
    const late = deliverReply(
      keel.pool,
      transports,
      { ...pending!, agentId: agent, conversationId: 'c1' },
      {
        signal: new AbortController().signal,
        heartbeat: () => undefined,
      },
    );
    await expect(late).rejects.toThrow(`turn ${pending!.turnId} not found`);
    expect(refusing.received.length).toBe(refusedBy);
  });
});
