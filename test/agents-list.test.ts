import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestKeel, uniqueId, type TestKeel } from './support/keel';

/** GET /v1/agents: what a person picks an agent from, each with its counts; a token scoped to one sees only it. */
const OPERATOR = 'agents-list-operator';
const AGENT_TOKEN = 'agents-list-agent';
let keel: TestKeel;
const prefix = uniqueId('list');
const first = `${prefix}-ada`;
const second = `${prefix}-bob`;

beforeAll(async () => {
  keel = await startTestKeel({
    tokens: new Map([
      [OPERATOR, '*'],
      [AGENT_TOKEN, first],
    ]),
  });
});
afterAll(async () => keel?.stop());

interface AgentItem {
  agentId: string;
  name: string;
  conversations: number;
  jobs: number;
  routines: number;
  waitingApprovals: number;
  lastActivityAt: string;
}
type AgentPage = { items: AgentItem[]; nextCursor: string | null };

async function get<T>(url: string, token = OPERATOR) {
  const res = await keel.api.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } });
  return { status: res.statusCode, body: res.json<T>() };
}

async function put(url: string, body: unknown) {
  const res = await keel.api.inject({
    method: url.endsWith('/jobs') ? 'POST' : 'PUT',
    url,
    headers: { authorization: `Bearer ${OPERATOR}`, 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
  expect(res.statusCode, res.body).toBeLessThan(300);
}

describe('the list of agents', () => {
  it('lists the agents with their counts, finds them by id or name, and pages', async () => {
    await put(`/v1/agents/${first}`, { name: 'Ada the researcher' });
    await put(`/v1/agents/${second}`, { name: 'Bob' });
    await keel.post(first, 'c1', { text: 'hello' }, { wait: 30, token: OPERATOR });
    await keel.post(first, 'c2', { text: 'hello again' }, { wait: 30, token: OPERATOR });
    await put(`/v1/agents/${first}/jobs`, {
      name: 'digest',
      schedule: { kind: 'every', intervalMs: 3_600_000 },
      task: 't',
    });

    const all = await get<AgentPage>(`/v1/agents?q=${prefix}`);
    expect(all.status).toBe(200);
    expect(
      all.body.items.map((a) => [a.agentId, a.name, a.conversations, a.jobs, a.routines, a.waitingApprovals]),
    ).toEqual([
      [first, 'Ada the researcher', 2, 1, 0, 0],
      [second, 'Bob', 0, 0, 0, 0],
    ]);
    expect(all.body.nextCursor).toBeNull();
    const [ada, bob] = all.body.items;
    expect(Date.parse(ada!.lastActivityAt)).toBeGreaterThanOrEqual(Date.parse(bob!.lastActivityAt));

    // By name, ignoring case; a % in q is a character, not a wildcard.
    const byName = await get<AgentPage>(`/v1/agents?q=${encodeURIComponent('RESEARCHER')}`);
    expect(byName.body.items.map((a) => a.agentId)).toContain(first);
    expect(byName.body.items.map((a) => a.agentId)).not.toContain(second);
    expect((await get<AgentPage>(`/v1/agents?q=${prefix}%25`)).body.items).toEqual([]);

    const page1 = await get<AgentPage>(`/v1/agents?q=${prefix}&limit=1`);
    expect(page1.body.items.map((a) => a.agentId)).toEqual([first]);
    const page2 = await get<AgentPage>(`/v1/agents?q=${prefix}&limit=1&cursor=${page1.body.nextCursor}`);
    expect(page2.body.items.map((a) => a.agentId)).toEqual([second]);
    expect(page2.body.nextCursor).toBeNull();
  });

  it("an agent's token sees its own agent only", async () => {
    const mine = await get<AgentPage>(`/v1/agents?q=${prefix}`, AGENT_TOKEN);
    expect(mine.status).toBe(200);
    expect(mine.body.items.map((a) => a.agentId)).toEqual([first]);
    const unfiltered = await get<AgentPage>('/v1/agents?limit=100', AGENT_TOKEN);
    expect(unfiltered.body.items.map((a) => a.agentId)).toEqual([first]);
  });

  it('refuses a cursor it did not give', async () => {
    const res = await get<{ error: { code: string } }>('/v1/agents?cursor=not-ours!');
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_cursor');
  });
});
