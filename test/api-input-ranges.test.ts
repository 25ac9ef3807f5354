import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversationWorkflowId } from '../domain/ids';
import { startTestKeel, uniqueId, type TestKeel } from './support/keel';

/**
 * Input the schemas let through that PostgreSQL could not take (issue 50): a NUL or a lone surrogate in a string
 * bound for jsonb, and JSON nested deeper than JSON.stringify goes. Each is now a 400 naming the field, or (a lone
 * surrogate) kept as U+FFFD, as a text column keeps it; before, each was a 500, or a 400 that named nothing.
 */
let keel: TestKeel;
const agent = uniqueId('ranges');
const conversation = uniqueId('c');

beforeAll(async () => {
  keel = await startTestKeel();
  const res = await keel.post(agent, conversation, { text: 'hello' }, { wait: 30 });
  expect(res.body.status, JSON.stringify(res.body)).toBe('replied');
  const app = await keel.call('PUT', `/v1/agents/${agent}/apps/crm`, {
    name: 'crm',
    tables: [{ name: 'notes', columns: ['text'] }],
  });
  expect(app.status, app.raw).toBe(200);
}, 120_000);
afterAll(async () => keel?.stop());

interface Refusal {
  error: { code: string; message: string; details?: { path: string; message: string }[] };
}

/** A raw JSON body: `\ud800` and deep nesting are sent as written, past JSON.stringify. */
async function send(method: 'POST' | 'PUT', url: string, payload: string) {
  const res = await keel.api.inject({ method, url, payload, headers: { 'content-type': 'application/json' } });
  return { status: res.statusCode, body: res.json<Refusal & Record<string, unknown>>(), raw: res.body };
}

const NUL = 'must not contain the NUL character (U+0000)';
const TOO_DEEP = 'must not nest arrays or objects over 100 deep';
/** An array 5,000 deep: JSON.stringify overflowed its stack on it (a 500); PostgreSQL takes 10,000. */
const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;

describe("an app's records (jsonb)", () => {
  const records = `/v1/agents/${agent}/apps/crm/tables/notes/records`;

  it('a lone surrogate in a value is kept as U+FFFD (it was a 500)', async () => {
    const res = await send('POST', records, '{"id":"r1","text":"a\\ud800b"}');
    expect(res.status, res.raw).toBe(201);
    expect(res.body).toEqual({ id: 'r1', text: 'a\uFFFDb' });
  });

  it('a NUL deep in a value is a 400 naming where it is', async () => {
    const res = await send('POST', records, '{"id":"r2","text":{"lines":["ok","a\\u0000b"]}}');
    expect(res.status, res.raw).toBe(400);
    expect(res.body.error).toEqual({
      code: 'invalid_request',
      message: `invalid body: /text/lines/1 ${NUL}`,
      details: [{ path: '/text/lines/1', message: NUL, code: 'custom' }],
    });
  });

  it('a value nested 5,000 deep is a 400 naming the column (it was a 500); 100 deep is kept', async () => {
    const res = await send('POST', records, `{"id":"r3","text":${deep(5000)}}`);
    expect(res.status, res.raw).toBe(400);
    expect(res.body.error.message).toBe(`invalid body: /text ${TOO_DEEP}`);
    const kept = await send('POST', records, `{"id":"r4","text":${deep(100)}}`);
    expect(kept.status, kept.raw).toBe(201);
  });
});

describe('a webhook URL with a lone surrogate (jsonb) is kept as U+FFFD; it was a 500', () => {
  const url = 'https://example.com/hook/a\\ud800b';
  const kept = 'https://example.com/hook/a\uFFFDb';

  it("in an agent's owner delivery", async () => {
    const res = await send(
      'PUT',
      `/v1/agents/${agent}`,
      `{"name":"ranges","owner":{"delivery":{"channel":"webhook","url":"${url}"}}}`,
    );
    expect(res.status, res.raw).toBe(200);
    expect(res.body.owner).toEqual({ delivery: { channel: 'webhook', url: kept, hasSecret: false } });
  });

  it("in a routine's delivery", async () => {
    const res = await send(
      'PUT',
      `/v1/agents/${agent}/apps/crm/routines/digest`,
      `{"label":"digest","schedule":{"expr":"daily"},"prompt":"p","delivery":{"channel":"webhook","url":"${url}"}}`,
    );
    expect(res.status, res.raw).toBe(201);
    expect(res.body.delivery).toEqual({ channel: 'webhook', url: kept, hasSecret: false });
  });
});

describe('an evaluation names the field that holds a NUL (it said only "an evaluation must not contain")', () => {
  const evaluate = (payload: string) => send('POST', `/v1/agents/${agent}/evals`, payload);
  const tool = (args: string) => `{"tool":"t","arguments":${args},"content":"c"}`;

  it.each([
    [
      'a written message',
      '{"mode":"live-model","written":[{"name":"w","messages":["a\\u0000"]}]}',
      '/written/0/messages/0',
    ],
    [
      "a candidate's system prompt",
      `{"mode":"replay","candidate":{"systemPrompt":"a\\u0000"},"recorded":{"conversationIds":["${conversation}"]}}`,
      '/candidate/systemPrompt',
    ],
    [
      "a written tool result's arguments",
      `{"mode":"live-model","written":[{"name":"w","messages":["x"],"tools":[${tool('{"q":["a\\u0000"]}')}]}]}`,
      '/written/0/tools/0/arguments/q/0',
    ],
    ['the suite', `{"mode":"replay","suite":"a\\u0000","recorded":{"conversationIds":["${conversation}"]}}`, '/suite'],
  ])('%s', async (_what, payload, path) => {
    const res = await evaluate(payload);
    expect(res.status, res.raw).toBe(400);
    expect(res.body.error.message).toBe(`invalid body: ${path} ${NUL}`);
    expect(res.body.error.details?.[0]?.path).toBe(path);
  });

  it("a written tool result's arguments nested 5,000 deep: 400 naming them (it was a 500)", async () => {
    const tools = tool(`{"a":${deep(5000)}}`);
    const res = await evaluate(`{"mode":"live-model","written":[{"name":"w","messages":["x"],"tools":[${tools}]}]}`);
    expect(res.status, res.raw).toBe(400);
    expect(res.body.error.message).toBe(`invalid body: /written/0/tools/0/arguments/a ${TOO_DEEP}`);
  });
});

describe("a run's reset reason (Temporal, then the audit trail's jsonb)", () => {
  it('with a NUL is a 400 naming it, and the run is not reset (it was reset, then answered 500)', async () => {
    const workflowId = conversationWorkflowId(agent, conversation);
    const before = await keel.client.workflow.getHandle(workflowId).describe();
    const res = await send('POST', `/v1/runs/${workflowId}/reset`, '{"to":"last-workflow-task","reason":"a\\u0000"}');
    expect(res.status, res.raw).toBe(400);
    expect(res.body.error.message).toBe(`invalid body: /reason ${NUL}`);
    const after = await keel.client.workflow.getHandle(workflowId).describe();
    expect(after.runId).toBe(before.runId);
    const audit = await keel.call<{ entries: { action: string }[] }>('GET', `/v1/agents/${agent}/audit`);
    expect(audit.body.entries.map((e) => e.action)).not.toContain('run.reset');
  });
});
