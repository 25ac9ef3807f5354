import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { stopProcess } from '../scripts/processes';
import { startTestKeel, uniqueId, type TestKeel } from './support/keel';
import { author, finished, routineApi, startIntegration, type Integration, type RoutineApi } from './support/routines';
import { startWebhookReceiver, type WebhookReceiver } from './support/webhook-receiver';
import { startWorkerProcess } from './support/workers';

// A routine run journals each capability call's arguments in a jsonb column, which reorders object keys (shorter
// first). The re-run after an approval, or after a crash, must still recognise the calls it made before.

/**
 * An order whose every object has keys that jsonb reorders: keys of different lengths at each depth, an array of
 * objects, the numbers 1.50 and 1e3, non-ASCII text (also in a key), and empty objects.
 */
const ORDER_JS = `{ customer: 'Zoë Ångström 🎉', total: 1.50,
  lines: [{ sku: 'A-1', qty: 1e3, unitPrice: 1.50 }, { sku: 'B-22', qty: 2, options: {} }],
  shipping: { 'straße': 'Königstraße 1', postalCode: '10115', eta: {} }, notes: {} }`;
const ORDER = {
  customer: 'Zoë Ångström 🎉',
  total: 1.5,
  lines: [
    { sku: 'A-1', qty: 1000, unitPrice: 1.5 },
    { sku: 'B-22', qty: 2, options: {} },
  ],
  shipping: { straße: 'Königstraße 1', postalCode: '10115', eta: {} },
  notes: {},
};
const ORDER_RECORD = { id: expect.any(String) as string, ...ORDER };

/** Upserts the order, tells the ERP about it, then sends a note: the send waits for approval. */
const PLACE_ORDER = {
  name: 'placeOrder',
  code: `async function placeOrder() {
    const order = ${ORDER_JS};
    const saved = await data.upsert('orders', order);
    await integrations.call('erp', { order, note: 'naïve café' });
    await send('Order for ' + saved.customer + ' to ' + saved.shipping['straße']);
    return 'placed ' + saved.lines.length + ' lines for ' + saved.customer;
  }`,
};

/** The ERP's answer, as text: its keys are in an order jsonb does not keep. */
const ERP_ANSWER = '{"status":"accepted","orderId":"erp-7","lines":[{"sku":"A-1","qty":1e3,"price":1.50}],"extra":{}}';

let keel: TestKeel;
let hook: WebhookReceiver;
let erp: Integration;
/** An integration whose answer holds what PostgreSQL cannot store: an escaped NUL and a lone surrogate. */
let odd: Integration;
const r = routineApi(() => keel);
beforeAll(async () => {
  [hook, erp, odd] = await Promise.all([
    startWebhookReceiver(),
    startIntegration(ERP_ANSWER),
    startIntegration('{"note":"a\\u0000b","mark":"\\ud800"}'),
  ]);
  keel = await startTestKeel({ routines: { integrations: { erp: erp.url, odd: odd.url } } });
});
afterAll(async () => {
  await keel?.stop();
  await Promise.all([hook?.close(), erp?.close(), odd?.close()]);
});

/** An app `shop` with an `orders` table, and a routine of it that runs `tool` (delivering to the webhook). */
async function shopRoutine(api: RoutineApi, slug: string, tool: { name: string; code: string }): Promise<string> {
  const a = uniqueId('a');
  const tables = [{ name: 'orders', columns: ['customer', 'total', 'lines', 'shipping', 'notes'] }];
  expect((await api.call('PUT', `/v1/agents/${a}/apps/shop`, { name: 'Shop', tables })).status).toBe(200);
  const delivery = { channel: 'webhook', url: hook.url };
  expect((await api.routine(a, 'shop', slug, { prompt: `Do it ${author(tool)}`, delivery })).status).toBe(201);
  return a;
}

/** The texts the webhook received for an agent. */
const sentTo = (a: string) =>
  hook.received.flatMap((x) => {
    const body = x.body as { agentId?: string; text: string };
    return body.agentId === a ? [body.text] : [];
  });
const erpCallsOf = (runId: string) => erp.keys.filter((k) => k.startsWith(`${runId}/`));

/** Approves or rejects a waiting run, then waits for its end. */
async function decide(a: string, slug: string, runId: string, verdict: 'approve' | 'reject', note?: string) {
  const answered = await r.call('POST', `/v1/agents/${a}/routine-runs/${runId}/${verdict}`, note ? { note } : {});
  expect(answered.status).toBe(202);
  return r.waitForRun(a, 'shop', slug, (x) => x.runId === runId && finished(x), `the run to end after ${verdict}`);
}
const needsApproval = (a: string, slug: string) => r.runNow(a, 'shop', slug, (x) => x.status === 'needs_approval');

describe('approval of a routine whose calls before the gate pass objects that jsonb reorders', () => {
  it('upsert of {customer: "Zed", total: "9"}, then send: approve → ok, one delivery, one order', async () => {
    const a = await shopRoutine(r, 'orders', {
      name: 'recordOrder',
      code: `async function recordOrder() {
        const order = await data.upsert('orders', { customer: 'Zed', total: '9' });
        await send('Order of ' + order.customer + ': ' + order.total);
        return 'recorded ' + order.customer;
      }`,
    });
    const waiting = await needsApproval(a, 'orders');
    expect(waiting.gate?.detail).toMatch(/^send "Order of Zed: 9" to webhook /);

    const done = await decide(a, 'orders', waiting.runId, 'approve');
    expect(done).toMatchObject({ status: 'ok', digest: 'recorded Zed' });
    expect(sentTo(a)).toEqual(['Order of Zed: 9']);
    const zed = { id: expect.any(String) as string, customer: 'Zed', total: '9' };
    expect(await r.records(a, 'shop', 'orders')).toEqual([zed]);
  });

  it('nested keys of other lengths, object arrays, 1.50, 1e3, non-ASCII, {}: approve → ok, none twice', async () => {
    const a = await shopRoutine(r, 'place', PLACE_ORDER);
    const waiting = await needsApproval(a, 'place');
    // The journal holds the upsert's arguments in jsonb's order, not the tool's: the case this test is about.
    const sql = 'SELECT args FROM routine_calls WHERE run_id = $1 AND seq = 1';
    const { rows } = await keel.pool.query<{ args: unknown[] }>(sql, [waiting.runId]);
    expect(rows[0]!.args).toEqual(['orders', ORDER]);
    expect(JSON.stringify(rows[0]!.args[1])).not.toBe(JSON.stringify(ORDER));

    const done = await decide(a, 'place', waiting.runId, 'approve');
    expect(done).toMatchObject({ status: 'ok', digest: 'placed 2 lines for Zoë Ångström 🎉' });
    expect(sentTo(a)).toEqual(['Order for Zoë Ångström 🎉 to Königstraße 1']);
    expect(await r.records(a, 'shop', 'orders')).toEqual([ORDER_RECORD]);
    expect(erpCallsOf(waiting.runId)).toHaveLength(1);
  });

  it('an answer whose keys jsonb reorders reads the same replayed: a send made of it is the one approved', async () => {
    const a = await shopRoutine(r, 'relay', {
      name: 'relayErp',
      code: `async function relayErp() {
        const answer = await integrations.call('erp', { ask: 'status' });
        await send('ERP said ' + JSON.stringify(answer));
        return 'relayed ' + Object.keys(answer).join(' ');
      }`,
    });
    const waiting = await needsApproval(a, 'relay');
    const approvedText = /^send "(ERP said .*)" to webhook /.exec(waiting.gate?.detail ?? '')?.[1];
    expect(JSON.parse(approvedText?.slice('ERP said '.length) ?? 'null')).toEqual(JSON.parse(ERP_ANSWER));

    const done = await decide(a, 'relay', waiting.runId, 'approve');
    expect(done).toMatchObject({ status: 'ok', digest: 'relayed extra lines orderId status' });
    expect(sentTo(a)).toEqual([approvedText]);
    expect(erpCallsOf(waiting.runId)).toHaveLength(1);
  });

  it('reject → rejected, nothing sent, the order upserted once and the ERP told once', async () => {
    const a = await shopRoutine(r, 'place', PLACE_ORDER);
    const waiting = await needsApproval(a, 'place');
    expect(waiting.gate?.detail).toMatch(/^send "Order for Zoë Ångström 🎉 to Königstraße 1" to webhook /);

    const done = await decide(a, 'place', waiting.runId, 'reject', 'not this one');
    expect(done).toMatchObject({ status: 'rejected', playbook: 'aborted' });
    expect(done.digest).toMatch(/^rejected \(not this one\), so nothing was done: send "Order for Zoë/);
    expect(sentTo(a)).toEqual([]);
    expect(await r.records(a, 'shop', 'orders')).toEqual([ORDER_RECORD]);
    expect(erpCallsOf(waiting.runId)).toHaveLength(1);
  });

  it('a tool that really calls something else on the re-run: error, naming the earlier and the new call', async () => {
    const a = await shopRoutine(r, 'drift', {
      name: 'drift',
      code: `async function drift() {
        await data.upsert('orders', { customer: 'Zed', total: String(Math.random()) });
        await send('drifted');
        return 'drifted';
      }`,
    });
    const waiting = await needsApproval(a, 'drift');
    const done = await decide(a, 'drift', waiting.runId, 'approve');
    expect(done.status).toBe('error');
    const upsert = `data\\.upsert\\("orders",\\{"customer":"Zed","total":"([^"]+)"\\}\\)`;
    const prefix = '^the tool did not repeat its earlier calls: call 1 was';
    const named = new RegExp(`${prefix} ${upsert} before and ${upsert} now$`);
    const [, before, now] = named.exec(done.digest ?? '') ?? [];
    expect((await r.records(a, 'shop', 'orders')).map((x) => x.total)).toEqual([before]);
    expect(now).not.toBe(before);
    expect(sentTo(a)).toEqual([]);
  });
});

describe('an integration answer PostgreSQL cannot store as it is', () => {
  it('is scrubbed once (NUL removed, lone surrogate replaced): the run is ok, the integration asked once', async () => {
    const a = await shopRoutine(r, 'odd', {
      name: 'askOdd',
      code: `async function askOdd() {
        const answer = await integrations.call('odd', {});
        return answer.note + '|' + answer.mark;
      }`,
    });
    const done = await r.runNow(a, 'shop', 'odd', finished);
    expect(done).toMatchObject({ status: 'ok', digest: 'ab|\ufffd' });
    expect(odd.keys.filter((k) => k.startsWith(`${done.runId}/`))).toHaveLength(1);
  });
});

describe('kill -9 of the worker in the middle of a tool that passed such an object', () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  });

  it('the retried run replays the upsert from its journal: ok, one order, the ERP asked again, same key', async () => {
    const held = await startIntegration(ERP_ANSWER, { holdFirst: true });
    cleanups.push(() => held.close());
    const crashKeel = await startTestKeel({ worker: false });
    cleanups.push(() => crashKeel.stop());
    const rc = routineApi(() => crashKeel);
    const env = { KEEL_INTEGRATIONS: JSON.stringify({ erp: held.url }) };
    const worker = startWorkerProcess(crashKeel, inject('databaseUrl'), env);
    cleanups.push(() => stopProcess(worker));
    const a = await shopRoutine(rc, 'sync', {
      name: 'syncOrder',
      code: `async function syncOrder() {
        const order = ${ORDER_JS};
        await data.upsert('orders', order);
        const answer = await integrations.call('erp', { order });
        return 'synced: ' + answer.status;
      }`,
    });
    expect((await rc.call('POST', `/v1/agents/${a}/apps/shop/routines/sync/run`)).status).toBe(202);
    await held.firstRequest;
    expect(await rc.records(a, 'shop', 'orders')).toEqual([ORDER_RECORD]);

    const exited = new Promise((resolve) => worker.once('exit', resolve));
    worker.kill('SIGKILL');
    await exited;
    const restarted = startWorkerProcess(crashKeel, inject('databaseUrl'), env);
    cleanups.push(() => stopProcess(restarted));

    const done = await rc.waitForRun(a, 'shop', 'sync', finished, 'the retried run');
    expect(done).toMatchObject({ status: 'ok', digest: 'synced: accepted' });
    expect(await rc.records(a, 'shop', 'orders')).toEqual([ORDER_RECORD]);
    // The held request and its retry, under one idempotency key: the retry is the same call, not a new one.
    expect(held.keys).toHaveLength(2);
    expect(new Set(held.keys).size).toBe(1);
  }, 120_000);
});
