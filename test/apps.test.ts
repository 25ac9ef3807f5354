import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestKeel, uniqueId, type TestKeel } from './support/keel';

let keel: TestKeel;
beforeAll(async () => {
  keel = await startTestKeel({ worker: false });
});
afterAll(async () => keel?.stop());

async function api<T = Record<string, unknown>>(
  method: 'GET' | 'POST' | 'PUT',
  url: string,
  body?: unknown,
): Promise<{ status: number; body: T }> {
  const res = await keel.api.inject({
    method,
    url,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) }),
  });
  return { status: res.statusCode, body: res.json<T>() };
}

describe('apps, tables and records', () => {
  it('defines an app, upserts records by id and lists them, app-scoped', async () => {
    const a = uniqueId('a');
    const app = await api('PUT', `/v1/agents/${a}/apps/crm`, {
      name: 'CRM',
      tables: [{ name: 'leads', columns: ['name', 'email', 'score'] }],
    });
    expect(app.status).toBe(200);
    expect(app.body).toMatchObject({
      appId: 'crm',
      name: 'CRM',
      tables: [{ name: 'leads', columns: ['name', 'email', 'score'] }],
    });

    const first = await api<{ id: string }>('POST', `/v1/agents/${a}/apps/crm/tables/leads/records`, {
      id: 'lead-1',
      name: 'Ada',
      email: 'ada@example.com',
    });
    expect(first).toEqual({ status: 201, body: { id: 'lead-1', name: 'Ada', email: 'ada@example.com' } });
    const again = await api('POST', `/v1/agents/${a}/apps/crm/tables/leads/records`, {
      id: 'lead-1',
      name: 'Ada L.',
      score: 90,
    });
    expect(again).toEqual({ status: 200, body: { id: 'lead-1', name: 'Ada L.', score: 90 } });
    const generated = await api<{ id: string }>('POST', `/v1/agents/${a}/apps/crm/tables/leads/records`, {
      name: 'Grace',
    });
    expect(generated.status).toBe(201);
    expect(generated.body.id).toMatch(/^[0-9a-f-]{36}$/);

    const listed = await api<{ id: string }[]>('GET', `/v1/agents/${a}/apps/crm/tables/leads/records`);
    expect(listed.body.map((r) => r.id)).toEqual(['lead-1', generated.body.id]);
    // Another agent's app of the same id is another app.
    expect((await api('GET', `/v1/agents/${uniqueId('b')}/apps/crm/tables/leads/records`)).status).toBe(404);
  });

  it('refuses unknown tables, unknown columns, duplicate table names and NUL characters', async () => {
    const a = uniqueId('a');
    await api('PUT', `/v1/agents/${a}/apps/crm`, { name: 'CRM', tables: [{ name: 'leads', columns: ['name'] }] });
    expect((await api('POST', `/v1/agents/${a}/apps/crm/tables/deals/records`, { name: 'x' })).status).toBe(404);
    expect((await api('POST', `/v1/agents/${a}/apps/nope/tables/leads/records`, { name: 'x' })).status).toBe(404);
    const unknown = await api<{ error: { code: string; message: string } }>(
      'POST',
      `/v1/agents/${a}/apps/crm/tables/leads/records`,
      { name: 'x', colour: 'red' },
    );
    expect([unknown.status, unknown.body.error.code, unknown.body.error.message]).toEqual([
      400,
      'unknown_columns',
      'table leads has no column(s): colour',
    ]);
    expect(
      (
        await api('PUT', `/v1/agents/${a}/apps/crm`, {
          name: 'CRM',
          tables: [
            { name: 'a', columns: [] },
            { name: 'A', columns: [] },
          ],
        })
      ).status,
    ).toBe(400);
    expect((await api('POST', `/v1/agents/${a}/apps/crm/tables/leads/records`, { name: 'x\u0000y' })).status).toBe(400);
  });
});
