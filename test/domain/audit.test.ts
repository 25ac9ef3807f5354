import { describe, expect, it } from 'vitest';
import { deliveryInAudit, destinationChange } from '../../domain/audit';
import type { Delivery } from '../../domain/delivery';

const SLACK_HOOK: Delivery = {
  channel: 'webhook',
  url: 'https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX?x=1',
};
const OPS: Delivery = { channel: 'webhook', url: 'http://ops.example.com:8080/in', secret: 's3cret' };

describe('deliveryInAudit', () => {
  it('keeps only the origin of a webhook: its path and query can be a credential, and the secret always is', () => {
    expect(deliveryInAudit(SLACK_HOOK)).toEqual({
      channel: 'webhook',
      origin: 'https://hooks.slack.com',
      signed: false,
    });
    expect(deliveryInAudit(OPS)).toEqual({ channel: 'webhook', origin: 'http://ops.example.com:8080', signed: true });
    expect(JSON.stringify(deliveryInAudit(OPS))).not.toContain('s3cret');
  });

  it('shows a Slack target and none as they are', () => {
    expect(deliveryInAudit({ channel: 'slack', target: 'C0123' })).toEqual({ channel: 'slack', target: 'C0123' });
    expect(deliveryInAudit({ channel: 'none' })).toEqual({ channel: 'none' });
  });
});

describe('destinationChange', () => {
  const none = { owner: null, destinations: {} };

  it('is undefined when nothing changed, whatever the key order', () => {
    expect(destinationChange(none, none)).toBeUndefined();
    const a = { owner: OPS, destinations: { ops: OPS } };
    const reordered: Delivery = { secret: 's3cret', url: 'http://ops.example.com:8080/in', channel: 'webhook' };
    expect(destinationChange(a, { owner: reordered, destinations: { ops: reordered } })).toBeUndefined();
  });

  it('names what was added, removed and changed, in name order', () => {
    const before = { owner: null, destinations: { ops: OPS, old: { channel: 'slack', target: 'C1' } as Delivery } };
    const after = {
      owner: { channel: 'slack', target: 'owner' } as Delivery,
      destinations: {
        ops: { ...OPS, secret: 'rotated' } as Delivery,
        zeta: SLACK_HOOK,
        alpha: { channel: 'none' } as Delivery,
      },
    };
    expect(destinationChange(before, after)).toEqual({
      owner: { from: null, to: { channel: 'slack', target: 'owner' } },
      destinations: {
        added: {
          alpha: { channel: 'none' },
          zeta: { channel: 'webhook', origin: 'https://hooks.slack.com', signed: false },
        },
        removed: ['old'],
        // A rotated secret is a change, though both sides look alike without it.
        changed: {
          ops: {
            from: { channel: 'webhook', origin: 'http://ops.example.com:8080', signed: true },
            to: { channel: 'webhook', origin: 'http://ops.example.com:8080', signed: true },
          },
        },
      },
    });
    expect(Object.keys(destinationChange(before, after)!.destinations!.added)).toEqual(['alpha', 'zeta']);
  });

  it('an owner removed is a change; destinations untouched are not mentioned', () => {
    expect(
      destinationChange({ owner: OPS, destinations: { ops: OPS } }, { owner: null, destinations: { ops: OPS } }),
    ).toEqual({
      owner: { from: { channel: 'webhook', origin: 'http://ops.example.com:8080', signed: true }, to: null },
    });
  });

  it('treats names like __proto__ and constructor as names', () => {
    const after = {
      owner: null,
      destinations: JSON.parse('{"__proto__":{"channel":"none"},"constructor":{"channel":"none"}}') as Record<
        string,
        Delivery
      >,
    };
    const change = destinationChange(none, after);
    expect(Object.keys(change!.destinations!.added)).toEqual(['__proto__', 'constructor']);
    expect(destinationChange(after, none)!.destinations!.removed).toEqual(['__proto__', 'constructor']);
  });
});
