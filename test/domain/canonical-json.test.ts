import { describe, expect, it } from 'vitest';
import { canonicalJson, inCanonicalOrder, sameJson } from '../../domain/canonical-json';

/** A value as the sandbox hands it to the host, and the same value as PostgreSQL's jsonb gives it back. */
const fresh = JSON.parse(
  '{"customer":"Zoë 日本 🎉","total":1.50,"qty":1e3,"lines":[{"sku":"A-1","price":2.50},{"sku":"B","note":{}}],' +
    '"ship":{"street":"x","zip":"1"},"meta":{}}',
) as unknown;
const fromJsonb = JSON.parse(
  '{"qty":1000,"meta":{},"ship":{"zip":"1","street":"x"},"lines":[{"sku":"A-1","price":2.5},{"sku":"B","note":{}}],' +
    '"total":1.5,"customer":"Zoë 日本 🎉"}',
) as unknown;

describe('canonicalJson', () => {
  it('gives one text for the same value whatever the key order, at every depth and inside arrays', () => {
    expect(JSON.stringify(fromJsonb)).not.toBe(JSON.stringify(fresh));
    expect(canonicalJson(fromJsonb)).toBe(canonicalJson(fresh));
    expect(canonicalJson(fresh)).toBe(
      '{"customer":"Zoë 日本 🎉","lines":[{"price":2.5,"sku":"A-1"},{"note":{},"sku":"B"}],"meta":{},"qty":1000,' +
        '"ship":{"street":"x","zip":"1"},"total":1.5}',
    );
    expect(sameJson(['orders', fromJsonb], ['orders', fresh])).toBe(true);
  });

  it('tells different values apart: a changed field, a missing key, another array order, a string for a number', () => {
    expect(sameJson({ a: 1, b: 2 }, { b: 2, a: 3 })).toBe(false);
    expect(sameJson({ a: 1, b: {} }, { a: 1 })).toBe(false);
    expect(sameJson([{ a: 1 }, { b: 2 }], [{ b: 2 }, { a: 1 }])).toBe(false);
    expect(sameJson({ total: '9' }, { total: 9 })).toBe(false);
  });

  it('writes what JSON.stringify writes for everything but key order', () => {
    const values: unknown[] = [null, true, 0, -0, 1e21, 5e-324, 0.1 + 0.2, 'a"\\\n\u2028', [], {}];
    values.push([undefined, () => 1], { u: undefined, d: new Date(0) });
    for (const v of values) expect(canonicalJson(v)).toBe(JSON.stringify(v));
    expect(canonicalJson(undefined)).toBe('null');
  });

  it('sorts by code unit, so that the order is the same on every machine', () => {
    expect(canonicalJson({ é: 1, z: 2, Z: 3, aa: 4, b: 5 })).toBe('{"Z":3,"aa":4,"b":5,"z":2,"é":1}');
  });
});

describe('inCanonicalOrder', () => {
  it('gives a fresh value and its jsonb round trip the same key order, so JSON.stringify of either is one text', () => {
    expect(JSON.stringify(inCanonicalOrder(fresh))).toBe(JSON.stringify(inCanonicalOrder(fromJsonb)));
    expect(inCanonicalOrder(fresh)).toEqual(fresh);
    const keys = Object.keys(inCanonicalOrder({ zip: 1, id: 2, '10': 3, '9': 4 }) as object);
    expect(keys).toEqual(['9', '10', 'id', 'zip']);
  });
});
