import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { conversationWorkflowId, delegateWorkflowId } from '../domain/ids';
import { delegateFinished } from '../workflows/conversation';
import { eventually, startTestKeel, uniqueId, type TestKeel } from './support/keel';

let keel: TestKeel;
beforeAll(async () => {
  keel = await startTestKeel();
});
afterAll(async () => keel?.stop());

async function api<T = Record<string, unknown>>(method: 'GET' | 'POST' | 'PUT' | 'PATCH', url: string, body?: unknown): Promise<{ status: number; body: T }> {
  const res = await keel.api.inject({
    method,
    url,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) }),
  });
  return { status: res.statusCode, body: res.json<T>() };
}

interface Message {
  seq: number;
  role: string;
  text: string;
}

async function messages(a: string, c: string): Promise<Message[]> {
  return (await api<{ messages: Message[] }>('GET', `/v1/agents/${a}/conversations/${c}?limit=1000`)).body.messages;
}

const relays = (ms: Message[]) => ms.filter((m) => m.role === 'assistant' && m.text.startsWith('relay: '));
const spawnedId = (text: string | undefined) => /spawned delegate (\S+)/.exec(text ?? '')?.[1];

interface DelegateView {
  lifecycle: string;
  outcome?: { kind: string; result: string; outcomeVersion: number; transcriptVersion: number; terminalOwner: string };
  admittedAt?: string;
  relay?: string;
  admissions: { decision: string; via: string }[];
}

async function delegate(a: string, id: string) {
  return (await api<DelegateView>('GET', `/v1/agents/${a}/delegates/${id}`)).body;
}

async function spawn(a: string, c: string, args: Record<string, unknown>): Promise<{ text: string; delegateId?: string }> {
  const res = await keel.post(a, c, { text: `/tool spawn_delegate ${JSON.stringify(args)}` }, { wait: 30 });
  const text = res.body.reply?.text ?? '';
  return { text, delegateId: spawnedId(text) };
}

describe('delegation through the REST API alone', () => {
  it('a ready task is handed to a delegate; its outcome is committed, admitted once and relayed; the task is done', async () => {
    const [a, c] = [uniqueId('a'), uniqueId('c')];
    const created = await api<{ number: number; status: string }>('POST', `/v1/agents/${a}/tasks`, { title: 'Write the summary', status: 'ready' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ number: 1, status: 'ready' });

    const { text, delegateId } = await spawn(a, c, { task: 1 });
    expect(text).toMatch(/^tool result: spawned delegate \S+ for task #1/);
    const id = delegateId!;
    await eventually(async () => relays(await messages(a, c)).length === 1, 30_000, 'the relay');

    const d = await delegate(a, id);
    expect(d.outcome).toEqual({ kind: 'success', result: 'done: Write the summary', outcomeVersion: 1, transcriptVersion: 1, terminalOwner: 'delegate' });
    expect(d.admittedAt).toBeTruthy();
    expect(d.relay).toBe('relayed');
    expect(d.admissions.filter((x) => x.decision === 'admitted')).toHaveLength(1);
    expect(relays(await messages(a, c))[0]!.text).toBe(`relay: ${id} success: done: Write the summary`);

    const task = await api<{ status: string; attempts: { delegateId: string; outcome: string; endedAt: string | null }[] }>('GET', `/v1/agents/${a}/tasks/1`);
    expect(task.body.status).toBe('done');
    expect(task.body.attempts).toEqual([expect.objectContaining({ delegateId: id, outcome: 'success', endedAt: expect.any(String) })]);
  });
});
