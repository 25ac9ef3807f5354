import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../domain/config';
import {
  addressClass,
  checkAddress,
  describeEgress,
  parseAddress,
  parseEgressAllow,
  staticEgressCheck,
  staticEgressRefusal,
  withLoopback,
  NO_EGRESS_EXCEPTIONS,
} from '../../domain/egress';

const classOf = (address: string) => addressClass(parseAddress(address)!);

describe('address classes', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['::1', 'loopback'],
    ['10.0.0.5', 'private'],
    ['172.16.3.4', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.10', 'private'],
    ['169.254.1.1', 'link_local'],
    ['fe80::1', 'link_local'],
    ['100.64.0.1', 'cgnat'],
    ['100.127.255.254', 'cgnat'],
    ['fc00::1', 'unique_local'],
    ['fd12:3456::1', 'unique_local'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'multicast'],
    ['0.0.0.0', 'unspecified'],
    ['::', 'unspecified'],
    ['255.255.255.255', 'broadcast'],
    ['169.254.169.254', 'cloud_metadata'],
    ['169.254.170.2', 'cloud_metadata'],
    ['fd00:ec2::254', 'cloud_metadata'],
    ['100.100.100.200', 'cloud_metadata'],
    // An IPv4-mapped IPv6 address reaches the IPv4 host, so it is classed as that host.
    ['::ffff:10.0.0.5', 'private'],
    ['::ffff:169.254.169.254', 'cloud_metadata'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['192.0.2.1', 'reserved'],
    ['240.0.0.1', 'reserved'],
    ['2002:a00:5::1', 'reserved'],
    ['64:ff9b::a00:5', 'reserved'],
  ])('%s is %s', (address, cls) => {
    expect(classOf(address)).toBe(cls);
  });

  it.each(['8.8.8.8', '93.184.215.14', '172.32.0.1', '100.128.0.1', '2606:4700::1111'])('%s is public', (a) => {
    expect(classOf(a)).toBeUndefined();
  });
});

describe('KEEL_EGRESS_ALLOW', () => {
  it('takes hosts, *.domains, addresses, CIDRs and the keyword loopback', () => {
    const allow = parseEgressAllow(' hooks.internal ,*.corp.example, 10.20.0.0/16,fd00::/8, 192.168.1.7,LOOPBACK ');
    expect(allow.hosts).toEqual(['hooks.internal']);
    expect(allow.suffixes).toEqual(['.corp.example']);
    expect(allow.entries).toEqual([
      'hooks.internal',
      '*.corp.example',
      '10.20.0.0/16',
      'fd00::/8',
      '192.168.1.7',
      'LOOPBACK',
    ]);
    expect(checkAddress('x', '10.20.9.9', allow)).toBeUndefined();
    expect(checkAddress('x', '10.21.0.1', allow)?.addressClass).toBe('private');
    expect(checkAddress('x', 'fd12::1', allow)).toBeUndefined();
    expect(checkAddress('x', '192.168.1.7', allow)).toBeUndefined();
    expect(checkAddress('x', '192.168.1.8', allow)?.addressClass).toBe('private');
    expect(checkAddress('x', '127.0.0.1', allow)).toBeUndefined();
    expect(checkAddress('x', '::1', allow)).toBeUndefined();
    // A named host passes whatever it resolves to; a *. entry covers sub-domains, not the domain itself.
    expect(checkAddress('Hooks.Internal.', '10.9.9.9', allow)).toBeUndefined();
    expect(checkAddress('a.b.corp.example', '10.9.9.9', allow)).toBeUndefined();
    expect(checkAddress('corp.example', '10.9.9.9', allow)?.addressClass).toBe('private');
  });

  it('opens a cloud metadata address only by an entry naming exactly that address', () => {
    for (const raw of ['169.254.0.0/16', 'loopback,0.0.0.0/0', 'metadata.test', '::/0'])
      expect(checkAddress('metadata.test', '169.254.169.254', parseEgressAllow(raw))?.addressClass).toBe(
        'cloud_metadata',
      );
    expect(checkAddress('metadata.test', '169.254.169.254', parseEgressAllow('169.254.169.254'))).toBeUndefined();
    expect(checkAddress('x', 'fd00:ec2::254', parseEgressAllow('fd00::/8'))?.addressClass).toBe('cloud_metadata');
    expect(checkAddress('x', 'fd00:ec2::254', parseEgressAllow('fd00:ec2::254/128'))).toBeUndefined();
  });

  const FORMS = '(entries are host names, *.domains, IP addresses, CIDRs or the keyword loopback)';
  it.each([
    ['10.0.0.0/33', `KEEL_EGRESS_ALLOW: \`10.0.0.0/33\` is not a CIDR like 10.20.0.0/16 or fd00::/64 ${FORMS}`],
    ['10.0.0/8', `KEEL_EGRESS_ALLOW: \`10.0.0/8\` is not a CIDR like 10.20.0.0/16 or fd00::/64 ${FORMS}`],
    [
      'http://hooks.example',
      `KEEL_EGRESS_ALLOW: \`http://hooks.example\` is not a CIDR like 10.20.0.0/16 or fd00::/64 ${FORMS}`,
    ],
    ['hooks example', `KEEL_EGRESS_ALLOW: \`hooks example\` is not an entry ${FORMS}`],
    ['*', `KEEL_EGRESS_ALLOW: \`*\` is not an entry ${FORMS}`],
  ])('refuses %s, naming it', (raw, message) => {
    expect(() => parseEgressAllow(raw)).toThrow(message);
    expect(() => loadConfig({ KEEL_EGRESS_ALLOW: raw })).toThrow(message);
  });

  it('is read by loadConfig; unset or empty, nothing but public addresses passes', () => {
    expect(loadConfig({}).egress.allow).toEqual(NO_EGRESS_EXCEPTIONS);
    expect(loadConfig({ KEEL_EGRESS_ALLOW: '' }).egress.allow).toEqual(NO_EGRESS_EXCEPTIONS);
    expect(loadConfig({ KEEL_EGRESS_ALLOW: 'loopback,hooks.internal' }).egress.allow.entries).toEqual([
      'loopback',
      'hooks.internal',
    ]);
  });

  it('npm start adds loopback once; the banner line says what is allowed', () => {
    expect(withLoopback(undefined)).toBe('loopback');
    expect(withLoopback('hooks.internal, 10.0.0.0/8')).toBe('loopback,hooks.internal,10.0.0.0/8');
    expect(withLoopback('Loopback,hooks.internal')).toBe('Loopback,hooks.internal');
    expect(describeEgress(parseEgressAllow(undefined))).toBe(
      'public addresses only (private, loopback, link-local, CGNAT, unique-local, multicast, metadata refused)',
    );
    expect(describeEgress(parseEgressAllow('loopback,hooks.internal'))).toBe(
      'public addresses and loopback, hooks.internal (every other non-public address refused)',
    );
  });
});

describe('the static check (a configured URL that can never pass)', () => {
  const none = NO_EGRESS_EXCEPTIONS;
  it.each([
    ['http://169.254.169.254/latest/meta-data/', 'cloud_metadata', '169.254.169.254'],
    ['http://[fd00:ec2::254]/latest', 'cloud_metadata', 'fd00:ec2::254'],
    ['http://10.0.0.5:8080/hook', 'private', '10.0.0.5'],
    ['https://192.168.0.1/', 'private', '192.168.0.1'],
    ['http://[::1]:9000/hook', 'loopback', '::1'],
    ['http://127.0.0.1:9000/hook', 'loopback', '127.0.0.1'],
    ['http://localhost:9000/hook', 'loopback', '127.0.0.1'],
    ['http://api.localhost/hook', 'loopback', '127.0.0.1'],
    // The URL parser normalises other spellings of an address before the check sees them.
    ['http://0x7f.1/', 'loopback', '127.0.0.1'],
    ['http://2130706433/', 'loopback', '127.0.0.1'],
    ['http://0251.0376.0251.0376/', 'cloud_metadata', '169.254.169.254'],
    ['http://[::ffff:a9fe:a9fe]/', 'cloud_metadata', '169.254.169.254'],
    ['http://0.0.0.0:80/', 'unspecified', '0.0.0.0'],
    ['http://100.64.1.1/', 'cgnat', '100.64.1.1'],
  ])('%s is refused (%s)', (url, cls, address) => {
    expect(staticEgressCheck(url, none)).toMatchObject({ addressClass: cls, address });
    expect(staticEgressRefusal(url, none)).toMatch(/^egress refused: .* is .*; Keel connects only to public addresses/);
  });

  it('names the class and the way out in its message', () => {
    expect(staticEgressRefusal('http://169.254.169.254/latest', none)).toBe(
      'egress refused: 169.254.169.254 is cloud metadata (169.254.169.254, 169.254.170.2, fd00:ec2::254, ' +
        '100.100.100.200); Keel connects only to public addresses unless KEEL_EGRESS_ALLOW lists the address itself',
    );
    expect(staticEgressRefusal('http://10.0.0.5/hook', none)).toBe(
      'egress refused: 10.0.0.5 is private (RFC 1918: 10/8, 172.16/12, 192.168/16); Keel connects only to public ' +
        'addresses unless KEEL_EGRESS_ALLOW lists the host, address or range',
    );
  });

  it('leaves names that need DNS to the guard at send time, and passes what the allow list opens', () => {
    expect(staticEgressRefusal('https://hooks.example.com/x', none)).toBeUndefined();
    expect(staticEgressRefusal('http://metadata.google.internal/', none)).toBeUndefined();
    expect(staticEgressRefusal('http://93.184.215.14/', none)).toBeUndefined();
    expect(staticEgressRefusal('not a url', none)).toBeUndefined();
    const loopback = parseEgressAllow('loopback');
    expect(staticEgressRefusal('http://127.0.0.1:9000/hook', loopback)).toBeUndefined();
    expect(staticEgressRefusal('http://[::1]:9000/hook', loopback)).toBeUndefined();
    expect(staticEgressRefusal('http://localhost:9000/hook', loopback)).toBeUndefined();
    expect(staticEgressRefusal('http://10.0.0.5/', parseEgressAllow('10.0.0.0/8'))).toBeUndefined();
    expect(staticEgressRefusal('http://localhost/', parseEgressAllow('localhost'))).toBeUndefined();
    expect(staticEgressRefusal('http://169.254.169.254/', parseEgressAllow('169.254.0.0/16'))).toMatch(
      /cloud metadata/,
    );
  });
});
