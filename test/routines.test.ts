import { randomUUID } from 'node:crypto';
import { Worker } from '@temporalio/worker';
import { Cron } from 'croner';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { routineScheduleId } from '../domain/ids';
import { temporalUnavailable } from '../services/temporal-status';
import { routineRunWorkflow } from '../workflows/routine-run';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { author, CONTACT_ADA, contactRecords, finished, routineApi, scheduledActivities } from './support/routines';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';

let keel: TestKeel;
let hook: WebhookReceiver;
const r = routineApi(() => keel);
beforeAll(async () => {
  // Short sandbox limits so that the slow paths take seconds; the defaults (8 s smoke, 120 s run) are in domain.
  keel = await startTestKeel({ routines: { smokeLimitMs: 1_000, runLimitMs: 3_000 } });
  hook = await startWebhookReceiver();
});
afterAll(async () => {
  await keel?.stop();
  await hook?.close();
});

const SCORE_LEADS = {
  name: 'scoreLeads',
  title: 'Lead Scorer',
  code: `async function scoreLeads({ input }) {
    const leads = await data.list('leads');
    const scored = [];
    for (const lead of leads) scored.push(lead.name + ': ' + (await ai.score(lead.email, 'priority')));
    return 'scored ' + leads.length + ' leads - ' + scored.join(', ');
  }`,
};

const deliveriesTo = (a: string) => hook.received.filter((x) => (x.body as { agentId?: string }).agentId === a);

describe('routines: a new user through the REST API with the scripted model', () => {
  it('authors a tool, saves it as version 1, runs it on the records: ok, digest, artifact, transcript', async () => {
    const a = uniqueId('a');
    await r.app(a, 'crm', [
      { id: 'l1', name: 'Ada', email: 'ada@example.com' },
      { id: 'l2', name: 'Grace', email: 'grace@example.com' },
    ]);
    const created = await r.routine(a, 'crm', 'triage', {
      label: 'Triage leads',
      prompt: `Score my leads ${author(SCORE_LEADS)}`,
    });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ slug: 'triage', status: 'active', cron: '0 9 * * *' });
    expect(Date.parse(created.body.nextRunAt as string)).toBeGreaterThan(Date.now());

    const run = await r.runNow(a, 'crm', 'triage');
    expect(run).toMatchObject({
      status: 'ok',
      sessionId: 'routine:crm:triage',
      tool: { name: 'scoreLeads', version: 1, authored: true },
      playbook: 'success',
    });
    expect(run.digest).toMatch(/^scored 2 leads - Ada: \d+, Grace: \d+$/);
    expect(run.workflowId).toMatch(new RegExp(`^${routineScheduleId(a, 'crm', 'triage')}-`));

    const tools = await r.call<{ name: string; version: number; authoredBy: string; code: string }[]>(
      'GET',
      `/v1/agents/${a}/apps/crm/tools`,
    );
    expect(tools.body).toEqual([
      expect.objectContaining({ name: 'scoreLeads', version: 1, authoredBy: 'model', code: SCORE_LEADS.code }),
    ]);

    const artifact = await r.call<{ title: string; content: string; runId: string }>(
      'GET',
      `/v1/agents/${a}/apps/crm/artifacts/${run.artifactId}`,
    );
    expect(artifact.status).toBe(200);
    expect(artifact.body).toMatchObject({ title: 'score-leads-run-1.md', runId: run.runId });
    expect(artifact.body.content).toContain(run.digest);

    const transcript = await r.call<{ messages: { role: string; text: string }[] }>(
      'GET',
      `/v1/agents/${a}/apps/crm/routines/triage/transcript`,
    );
    expect(transcript.body.messages.map((m) => [m.role, m.text])).toEqual([
      ['user', `(scheduled) Score my leads ${author(SCORE_LEADS)}`],
      ['assistant', run.digest],
    ]);
    expect(await scheduledActivities(keel, run)).toContain('draftRoutineTool');

    // A second run whose prompt names the tool reuses it: no authoring in its history, and the next artifact number.
    await r.routine(a, 'crm', 'triage', { label: 'Triage leads', prompt: 'Run scoreLeads on the new leads' });
    const second = await r.runNow(a, 'crm', 'triage');
    expect(second).toMatchObject({ status: 'ok', tool: { name: 'scoreLeads', version: 1, authored: false } });
    expect(await scheduledActivities(keel, second)).not.toContain('draftRoutineTool');
    const secondArtifact = await r.call<{ title: string }>(
      'GET',
      `/v1/agents/${a}/apps/crm/artifacts/${second.artifactId}`,
    );
    expect(secondArtifact.body.title).toBe('score-leads-run-2.md');
    // Two title words of a saved tool in the prompt also select it.
    await r.routine(a, 'crm', 'triage', { label: 'Triage leads', prompt: 'the lead scorer, please' });
    expect((await r.runNow(a, 'crm', 'triage')).tool).toEqual({ name: 'scoreLeads', version: 1, authored: false });
  });

  it('a tool that throws ReferenceError gets one repair; the repaired tool is saved and runs', async () => {
    const a = uniqueId('a');
    await r.app(a, 'crm', [{ id: 'l1', name: 'Ada', email: 'ada@example.com' }]);
    const broken = { name: 'countLeads', code: 'async function countLeads() { return leadz.length; }' };
    const fixed = {
      name: 'countLeads',
      code: "async function countLeads() { return (await data.list('leads')).length + ' leads'; }",
    };
    await r.routine(a, 'crm', 'count', {
      prompt: `How many? ${author(broken)} ${author(fixed).replace('/author', '/repair')}`,
    });
    const run = await r.runNow(a, 'crm', 'count');
    expect(run).toMatchObject({ status: 'ok', digest: '1 leads', tool: { name: 'countLeads', version: 1 } });
    expect((await scheduledActivities(keel, run)).filter((t) => t === 'draftRoutineTool')).toHaveLength(2);
    const tools = await r.call<{ code: string }[]>('GET', `/v1/agents/${a}/apps/crm/tools`);
    expect(tools.body.map((t) => t.code)).toEqual([fixed.code]);
  });

  it('a tool that fails twice is not saved and the run is error, with the crash as its reason', async () => {
    const a = uniqueId('a');
    await r.app(a, 'crm', []);
    await r.routine(a, 'crm', 'broken', {
      prompt: author({ name: 'broken', code: 'async function broken() { return leadz.length; }' }),
    });
    const run = await r.runNow(a, 'crm', 'broken');
    expect(run.status).toBe('error');
    expect(run.digest).toMatch(/no tool could be authored: ReferenceError: leadz is not defined/);
    expect(run.tool).toBeNull();
    expect(run.playbook).toBe('aborted');
    expect((await scheduledActivities(keel, run)).filter((t) => t === 'draftRoutineTool')).toHaveLength(2);
    expect((await r.call<unknown[]>('GET', `/v1/agents/${a}/apps/crm/tools`)).body).toEqual([]);
  });

  it('a capability that does not exist fails the static check, gets its repair, is not saved if it stays', async () => {
    const a = uniqueId('a');
    await r.app(a, 'crm', []);
    await r.routine(a, 'crm', 'deals', {
      prompt: author({ name: 'deals', code: "async function deals() { return await crm.deals('open'); }" }),
    });
    const run = await r.runNow(a, 'crm', 'deals');
    // `crm.deals` is no capability root the static check knows: the smoke run catches it as a ReferenceError.
    expect(run).toMatchObject({ status: 'error' });
    expect(run.digest).toMatch(/crm is not defined/);
    await r.routine(a, 'crm', 'ai', {
      prompt: author({ name: 'aiTranslate', code: "async function aiTranslate() { return await ai.translate('x'); }" }),
    });
    const second = await r.runNow(a, 'crm', 'ai');
    expect(second.digest).toMatch(/references a capability that does not exist here: ai.translate/);
  });

  it('prompt precedence: the playbook rule beats the prompt; with neither the run fails without dispatch', async () => {
    const a = uniqueId('a');
    await r.app(a, 'crm', []);
    await r.routine(a, 'crm', 'pb', {
      label: 'Label',
      prompt: 'the prompt',
      playbook: `Follow the rule ${author({ name: 'rule', code: "async function rule() { return 'by the rule'; }" })}`,
    });
    const run = await r.runNow(a, 'crm', 'pb');
    expect(run).toMatchObject({ status: 'ok', digest: 'by the rule' });
    expect(run.prompt).toMatch(/^Follow the rule/);

    await r.routine(a, 'crm', 'empty', { label: ' ' });
    const empty = await r.runNow(a, 'crm', 'empty');
    expect(empty).toMatchObject({
      status: 'error',
      digest: 'Routine has no prompt — set the prompt in Edit',
      tool: null,
    });
    expect(await scheduledActivities(keel, empty)).toEqual(['beginRoutineRun', 'finishRoutineRun']);
  });

  it('a tool that loops forever is stopped at the run limit; the worker goes on running tools', async () => {
    const a = uniqueId('a');
    await r.app(a, 'crm', []);
    // The smoke run times out too, which counts as a pass (only crashes get a repair): the tool is saved.
    await r.routine(a, 'crm', 'spin', {
      prompt: author({ name: 'spin', code: 'async function spin() { for (;;) {} }' }),
    });
    const run = await r.runNow(a, 'crm', 'spin');
    expect(run).toMatchObject({
      status: 'error',
      digest: 'this took too long, so the run was stopped at the 3 s limit',
    });
    await r.routine(a, 'crm', 'after', {
      prompt: author({ name: 'after', code: "async function after() { return 'still here'; }" }),
    });
    expect(await r.runNow(a, 'crm', 'after')).toMatchObject({ status: 'ok', digest: 'still here' });
  });
});

describe('approval that resumes', () => {
  it('upsert then send: needs_approval; approve → one delivery; the record was upserted exactly once', async () => {
    const a = uniqueId('a');
    await r.app(a, 'crm', [{ id: 'l1', name: 'Ada', email: 'ada@example.com', touches: '0' }]);
    await r.routine(a, 'crm', 'contact', {
      prompt: `Contact Ada ${author(CONTACT_ADA)}`,
      delivery: { channel: 'webhook', url: hook.url },
    });

    const waiting = await r.runNow(a, 'crm', 'contact', (x) => x.status === 'needs_approval');
    expect(waiting.gate?.capability).toBe('send');
    expect(waiting.gate?.detail).toMatch(
      /^send "Contacted Ada: draft: a short note to Ada" to webhook 127\.0\.0\.1:\d+$/,
    );
    expect(waiting.playbook).toBe('partial');
    expect(waiting.digest).toMatch(/^paused for your approval: send "Contacted Ada/);
    expect(await contactRecords(r, a, 'crm')).toBe(1);
    expect(deliveriesTo(a)).toHaveLength(0);

    const approved = await r.call('POST', `/v1/agents/${a}/routine-runs/${waiting.runId}/approve`, {
      note: 'go ahead',
    });
    expect(approved).toEqual({ status: 202, body: { runId: waiting.runId, decision: 'approved' } });
    const done = await r.waitForRun(
      a,
      'crm',
      'contact',
      (x) => x.runId === waiting.runId && finished(x),
      'approved run to finish',
    );
    expect(done).toMatchObject({ status: 'ok', digest: 'contacted Ada', playbook: 'success' });
    expect(deliveriesTo(a)).toHaveLength(1);
    expect(deliveriesTo(a)[0]!.body).toMatchObject({ text: 'Contacted Ada: draft: a short note to Ada' });
    // The re-run replayed the journal: the upsert before the gate did not happen a second time.
    expect(await contactRecords(r, a, 'crm')).toBe(1);

    const again = await r.call<{ error: { code: string } }>(
      'POST',
      `/v1/agents/${a}/routine-runs/${waiting.runId}/approve`,
    );
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('not_awaiting_approval');

    // The run's history, through the gate and the approval, replays against the current workflow code.
    const history = await keel.client.workflow.getHandle(done.workflowId, done.runId).fetchHistory();
    await expect(
      Worker.runReplayHistory({ workflowBundle: { codePath: inject('workflowBundlePath') } }, history),
    ).resolves.toBeUndefined();
  });

  it('reject → no delivery, the run is rejected with the note', async () => {
    const a = uniqueId('a');
    await r.app(a, 'crm', [{ id: 'l1', name: 'Ada', email: 'ada@example.com', touches: '0' }]);
    await r.routine(a, 'crm', 'contact', {
      prompt: `Contact Ada ${author(CONTACT_ADA)}`,
      delivery: { channel: 'webhook', url: hook.url },
    });
    const waiting = await r.runNow(a, 'crm', 'contact', (x) => x.status === 'needs_approval');
    const rejected = await r.call('POST', `/v1/agents/${a}/routine-runs/${waiting.runId}/reject`, {
      note: 'not today',
    });
    expect(rejected.status).toBe(202);
    const done = await r.waitForRun(
      a,
      'crm',
      'contact',
      (x) => x.runId === waiting.runId && finished(x),
      'rejected run to finish',
    );
    expect(done).toMatchObject({ status: 'rejected', playbook: 'aborted' });
    expect(done.digest).toMatch(/^rejected \(not today\), so nothing was done: send "Contacted Ada/);
    expect(deliveriesTo(a)).toHaveLength(0);
  });

  it('no decision within the approval wait: rejected, nothing sent', async () => {
    const short = await startTestKeel({ routines: { approvalWaitMs: 1_500 } });
    try {
      const rs = routineApi(() => short);
      const a = uniqueId('a');
      await rs.app(a, 'crm', [{ id: 'l1', name: 'Ada', email: 'ada@example.com', touches: '0' }]);
      await rs.routine(a, 'crm', 'contact', {
        prompt: `Contact Ada ${author(CONTACT_ADA)}`,
        delivery: { channel: 'webhook', url: hook.url },
      });
      const run = await rs.runNow(a, 'crm', 'contact');
      expect(run.status).toBe('rejected');
      expect(run.digest).toMatch(/^no decision within 0 h, so nothing was done/);
      expect(deliveriesTo(a)).toHaveLength(0);
    } finally {
      await short.stop();
    }
  });
});

describe('schedules: pause, run-now, overlap, edits', () => {
  it('a paused routine does not fire: its Schedule paused, run-now refused, a racing fire runs nothing', async () => {
    const a = uniqueId('a');
    await r.app(a, 'crm', []);
    await r.routine(a, 'crm', 'nightly', {
      prompt: author({ name: 'nightly', code: "async function nightly() { return 'ran'; }" }),
    });
    const paused = await r.call('POST', `/v1/agents/${a}/apps/crm/routines/nightly/pause`);
    expect(paused.body).toMatchObject({ status: 'paused', nextRunAt: null });
    const handle = keel.client.schedule.getHandle(routineScheduleId(a, 'crm', 'nightly'));
    expect((await handle.describe()).state.paused).toBe(true);

    const refused = await r.call<{ error: { code: string } }>('POST', `/v1/agents/${a}/apps/crm/routines/nightly/run`);
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('routine_paused');

    // A fire that slipped past the pause (triggered on the Schedule itself): the run sees the pause and does nothing.
    await handle.trigger();
    // A Schedule's describe is a query to its scheduler workflow, which may time out while the server's own worker
    // takes the trigger: read again then.
    const fired = await eventually(
      async () => {
        const described = await handle.describe().catch((err: unknown) => {
          if (temporalUnavailable(err)) return undefined;
          throw err;
        });
        return described?.info.recentActions[0];
      },
      30_000,
      'the triggered fire',
    );
    expect(await keel.client.workflow.getHandle(fired.action.workflow.workflowId).result()).toEqual({
      status: 'skipped',
      reason: 'the routine is paused',
    });
    expect(await r.runs(a, 'crm', 'nightly')).toEqual([]);

    const resumed = await r.call<{ status: string; nextRunAt: string }>(
      'POST',
      `/v1/agents/${a}/apps/crm/routines/nightly/resume`,
    );
    expect(resumed.body.status).toBe('active');
    expect(Date.parse(resumed.body.nextRunAt)).toBeGreaterThan(Date.now());
    expect((await handle.describe()).state.paused).toBe(false);
    expect(await r.runNow(a, 'crm', 'nightly')).toMatchObject({ status: 'ok', digest: 'ran' });
  });

  it('run-now during a run starts no second run; an edit during the run is not overwritten by its end', async () => {
    const a = uniqueId('a');
    await r.app(a, 'crm', [{ id: 'l1', name: 'Ada', email: 'ada@example.com', touches: '0' }]);
    // First at minute 30 of 09:00 UTC, so that no fire of the old schedule is ever a fire of the edited one (hourly).
    await r.routine(a, 'crm', 'contact', {
      label: 'Contact',
      schedule: { expr: '30 9 * * *' },
      prompt: `Contact Ada ${author(CONTACT_ADA)}`,
      delivery: { channel: 'webhook', url: hook.url },
    });
    const waiting = await r.runNow(a, 'crm', 'contact', (x) => x.status === 'needs_approval');

    const busy = await r.call<{ error: { code: string; message: string } }>(
      'POST',
      `/v1/agents/${a}/apps/crm/routines/contact/run`,
    );
    expect(busy.status).toBe(409);
    expect(busy.body.error.code).toBe('run_in_flight');
    // A fire that reaches Temporal anyway (a Schedule trigger with ALLOW_ALL, an operator starting the workflow) finds
    // the run in flight and runs nothing.
    const forced = await keel.client.workflow.execute(routineRunWorkflow, {
      workflowId: uniqueId('forced'),
      taskQueue: keel.taskQueue,
      args: [{ agentId: a, appId: 'crm', slug: 'contact' }],
    });
    expect(forced).toEqual({ status: 'skipped', reason: `run ${waiting.runId} is still in flight` });
    const handle = keel.client.schedule.getHandle(routineScheduleId(a, 'crm', 'contact'));
    expect((await r.runs(a, 'crm', 'contact')).map((x) => x.runId)).toEqual([waiting.runId]);

    // Edit the routine while its run waits (a new delivery too); the run's end must leave the edit alone, and the
    // approved send goes where the approver was shown, not to the new delivery.
    const other = await startWebhookReceiver();
    try {
      const edited = await r.routine(a, 'crm', 'contact', {
        label: 'Contact (edited)',
        schedule: { expr: 'hourly' },
        prompt: 'Run contactAda',
        delivery: { channel: 'webhook', url: other.url },
      });
      expect(edited.status).toBe(200);
      await r.call('POST', `/v1/agents/${a}/routine-runs/${waiting.runId}/approve`);
      await r.waitForRun(a, 'crm', 'contact', (x) => x.runId === waiting.runId && finished(x), 'the run to finish');
      expect(deliveriesTo(a)).toHaveLength(1);
      expect(other.received).toHaveLength(0);
    } finally {
      await other.close();
    }
    const asked = new Date();
    const after = await r.call<{ label: string; prompt: string; cron: string; nextRunAt: string; status: string }>(
      'GET',
      `/v1/agents/${a}/apps/crm/routines/contact`,
    );
    const scheduled = (await handle.describe()).info.nextActionTimes[0]?.toISOString();
    const answered = new Date();
    expect(after.body).toMatchObject({
      label: 'Contact (edited)',
      prompt: 'Run contactAda',
      cron: '0 * * * *',
      status: 'active',
    });
    // The next run, computed here from the edited expression and zone (not read from the Schedule, as the API does):
    // the next full hour after the requests (the later one if an hour began while they were answered).
    const hourly = new Cron('0 * * * *', { timezone: 'UTC', mode: '5-part', paused: true });
    const expected = [hourly.nextRun(asked), hourly.nextRun(answered)].map((d) => d?.toISOString());
    expect(expected).toContain(after.body.nextRunAt);
    // And the Schedule, which the fires come from, was changed with the row.
    expect(expected).toContain(scheduled);

    // One more run-now after the end: exactly two runs in all.
    await r.runNow(a, 'crm', 'contact', (x) => x.status === 'needs_approval');
    expect(await r.runs(a, 'crm', 'contact')).toHaveLength(2);
  });

  it('a run that ends early (cancelled, or terminated outside Keel) is closed, not blocking the routine', async () => {
    const a = uniqueId('a');
    await r.app(a, 'crm', [{ id: 'l1', name: 'Ada', email: 'ada@example.com' }]);
    await r.routine(a, 'crm', 'contact', {
      prompt: `Contact Ada ${author(CONTACT_ADA)}`,
      delivery: { channel: 'webhook', url: hook.url },
    });

    const first = await r.runNow(a, 'crm', 'contact', (x) => x.status === 'needs_approval');
    await keel.client.workflow.getHandle(first.workflowId, undefined, { firstExecutionRunId: first.runId }).cancel();
    const cancelled = await r.waitForRun(
      a,
      'crm',
      'contact',
      (x) => x.runId === first.runId && finished(x),
      'the cancelled run to be closed',
    );
    expect(cancelled).toMatchObject({ status: 'error', digest: 'the run was cancelled' });

    const second = await r.runNow(a, 'crm', 'contact', (x) => x.status === 'needs_approval');
    await keel.client.workflow
      .getHandle(second.workflowId, undefined, { firstExecutionRunId: second.runId })
      .terminate('operator');
    // The row still says needs_approval, but its workflow is gone: run-now closes it as abandoned and runs again.
    const third = await r.runNow(a, 'crm', 'contact', (x) => x.status === 'needs_approval');
    expect(third.runId).not.toBe(second.runId);
    expect((await r.runs(a, 'crm', 'contact')).find((x) => x.runId === second.runId)).toMatchObject({
      status: 'error',
      digest: 'abandoned: its workflow ended without finishing the run',
    });
    expect(deliveriesTo(a)).toHaveLength(0);
  });

  it('bad input gets the API error shape: a schedule under the floor, unknown app, fields and runs', async () => {
    const a = uniqueId('a');
    await r.app(a, 'crm', []);
    const floor = await r.call<{ error: { code: string; message: string } }>(
      'PUT',
      `/v1/agents/${a}/apps/crm/routines/fast`,
      { label: 'x', schedule: { expr: '*/5 * * * *' } },
    );
    expect(floor.status).toBe(400);
    expect(floor.body.error.code).toBe('invalid_schedule');
    expect(floor.body.error.message).toMatch(/15 minutes apart/);
    const noApp = await r.call<{ error: { code: string } }>('PUT', `/v1/agents/${a}/apps/nope/routines/x`, {
      label: 'x',
      schedule: { expr: 'daily' },
    });
    expect(noApp.status).toBe(404);
    const extra = await r.call<{ error: { code: string } }>('PUT', `/v1/agents/${a}/apps/crm/routines/x`, {
      label: 'x',
      schedule: { expr: 'daily' },
      owner: 'me',
    });
    expect(extra.status).toBe(400);
    const unknownRun = await r.call('POST', `/v1/agents/${a}/routine-runs/${randomUUID()}/approve`);
    expect(unknownRun, JSON.stringify(unknownRun.body)).toMatchObject({ status: 404 });
    expect((await r.call('GET', `/v1/agents/${a}/apps/crm/routines/none/runs`)).status).toBe(404);
    expect((await r.call('GET', `/v1/agents/${a}/apps/crm/artifacts/art_00000000`)).status).toBe(404);
    // Nothing was half-created: no routine row and no Schedule for the refused ones.
    expect((await r.call('GET', `/v1/agents/${a}/apps/crm/routines/fast`)).status).toBe(404);
    await expect(keel.client.schedule.getHandle(routineScheduleId(a, 'crm', 'fast')).describe()).rejects.toThrow();
  });
});
