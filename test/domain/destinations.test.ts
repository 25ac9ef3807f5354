import { describe, expect, it } from 'vitest';
import {
  Destinations,
  destinationNames,
  MODEL_TARGET_REFUSED,
  resolveDestination,
  type DestinationBook,
} from '../../domain/delivery';
import { validateNewJob, type JobContext, type NewJob } from '../../domain/jobs';
import { parseToolCall, scheduleTool } from '../../domain/tools';

const ops = { channel: 'webhook', url: 'https://ops.example.com/hook' } as const;
const owner = { channel: 'slack', target: 'U0OWNER' } as const;
const book: DestinationBook = { destinations: { 'ops-webhook': ops }, ownerDelivery: owner };
const ctx = (over: Partial<JobContext> = {}): JobContext => ({
  now: new Date('2026-06-01T12:00:00Z'),
  existingJobs: 0,
  nameTaken: false,
  destinations: book,
  ...over,
});
const job = (delivery?: NewJob['delivery']): NewJob => ({
  name: 'digest',
  task: 'Summarise the inbox.',
  schedule: { kind: 'every', intervalMs: 3_600_000 },
  ...(delivery === undefined ? {} : { delivery }),
});
const refusal = (j: NewJob, c: JobContext) => {
  const v = validateNewJob(j, c);
  return v.ok ? undefined : v.error;
};

describe('named destinations', () => {
  it('a name resolves to its Delivery; "owner" to the owner delivery, and only once one is set', () => {
    expect(resolveDestination(book, 'ops-webhook')).toEqual(ops);
    expect(resolveDestination(book, 'owner')).toEqual(owner);
    expect(resolveDestination({ ...book, ownerDelivery: null }, 'owner')).toBeUndefined();
    expect(resolveDestination(book, 'toString')).toBeUndefined();
    expect(destinationNames(book)).toEqual(['ops-webhook', 'owner']);
  });

  it('a person configures at most 50, with names of 1–64 characters, and "owner" is reserved', () => {
    const many = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`d${i}`, ops]));
    expect(Destinations.safeParse(many).error?.issues[0]?.message).toBe('an agent may have at most 50 destinations');
    expect(Destinations.safeParse(Object.fromEntries(Object.entries(many).slice(0, 50))).success).toBe(true);
    expect(Destinations.safeParse({ Owner: ops }).error?.issues[0]?.message).toBe(
      '"owner" names the owner delivery: set it as owner.delivery',
    );
    expect(Destinations.safeParse({ ['x'.repeat(64)]: ops }).success).toBe(true);
    for (const name of ['x'.repeat(65), 'http://collector.example.net/x', 'has space', ''])
      expect(Destinations.safeParse({ [name]: ops }).success, name).toBe(false);
  });
});

describe('who may choose a job target', () => {
  it('the model names a destination; a Delivery of its own is refused as target_not_allowed', () => {
    expect(validateNewJob(job('ops-webhook'), ctx({ chosenBy: 'agent' })).ok).toBe(true);
    expect(validateNewJob(job('owner'), ctx({ chosenBy: 'agent' })).ok).toBe(true);
    expect(validateNewJob(job(), ctx({ chosenBy: 'agent' })).ok).toBe(true);
    const raw = job({ channel: 'webhook', url: 'http://collector.example.net/x' });
    expect(refusal(raw, ctx({ chosenBy: 'agent' }))).toEqual({
      code: 'target_not_allowed',
      field: 'delivery',
      message: MODEL_TARGET_REFUSED,
      status: 400,
    });
    expect(refusal(job({ channel: 'slack', target: 'C0EVIL' }), ctx({ chosenBy: 'agent' }))?.code).toBe(
      'target_not_allowed',
    );
    // Unset is the model: the stricter reading.
    expect(refusal(raw, ctx())?.code).toBe('target_not_allowed');
  });

  it('a person may give a Delivery or a name', () => {
    const raw = job({ channel: 'webhook', url: 'https://hooks.example.com/x' });
    expect(validateNewJob(raw, ctx({ chosenBy: 'user' })).ok).toBe(true);
    expect(validateNewJob(job('ops-webhook'), ctx({ chosenBy: 'user' })).ok).toBe(true);
  });

  it('a name that is not one of the agent’s destinations is refused, listing the names there are', () => {
    expect(refusal(job('ops'), ctx({ chosenBy: 'user' }))).toEqual({
      code: 'unknown_destination',
      field: 'delivery',
      message: 'this agent has no destination named "ops" (its destinations: ops-webhook, owner)',
      status: 400,
    });
    expect(refusal(job('ops'), ctx({ chosenBy: 'agent', destinations: undefined }))?.message).toBe(
      'this agent has no destination named "ops" (it has none: a person configures them)',
    );
  });
});

describe('the schedule tool takes a name only', () => {
  const call = (delivery: unknown) =>
    parseToolCall({ name: 'schedule', input: { action: 'create', delivery } }, [scheduleTool.name]);

  it('a Delivery object or a URL is refused with an error the model reads', () => {
    expect(call({ channel: 'webhook', url: 'http://collector.example.net/x' })).toEqual({
      ok: false,
      error: `invalid arguments for schedule: delivery: ${MODEL_TARGET_REFUSED}`,
    });
    const url = call('http://collector.example.net/x');
    expect(url.ok).toBe(false);
    expect(!url.ok && url.error).toContain('never give a URL or a Slack target');
    expect(call('ops-webhook')).toEqual({ ok: true, input: { action: 'create', delivery: 'ops-webhook' } });
  });
});
