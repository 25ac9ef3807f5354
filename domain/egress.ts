import ipaddr from 'ipaddr.js';

/**
 * The egress guard's rules, pure: which addresses Keel refuses to connect to, the operator's exceptions
 * (`KEEL_EGRESS_ALLOW`), and the check the API can make before anything resolves (a URL whose host is an address, or
 * a name that always means this machine). The resolving, connecting half lives in adapters/egress.ts.
 */

/** Why an address is refused. Every address outside ipaddr.js's `unicast` range is refused; these name the range. */
export type AddressClass =
  | 'loopback'
  | 'private'
  | 'link_local'
  | 'cgnat'
  | 'unique_local'
  | 'multicast'
  | 'unspecified'
  | 'broadcast'
  | 'cloud_metadata'
  | 'reserved';

export const ADDRESS_CLASSES: Readonly<Record<AddressClass, string>> = {
  loopback: 'loopback (127.0.0.0/8, ::1)',
  private: 'private (RFC 1918: 10/8, 172.16/12, 192.168/16)',
  link_local: 'link-local (169.254/16, fe80::/10)',
  cgnat: 'carrier-grade NAT (100.64/10)',
  unique_local: 'unique-local (fc00::/7)',
  multicast: 'multicast (224/4, ff00::/8)',
  unspecified: 'unspecified (0.0.0.0/8, ::)',
  broadcast: 'broadcast (255.255.255.255)',
  cloud_metadata: 'cloud metadata (169.254.169.254, 169.254.170.2, fd00:ec2::254, 100.100.100.200)',
  reserved: 'reserved or special-purpose (documentation, benchmarking, 240/4, IPv6 transition ranges, …)',
};

/**
 * Instance metadata services: AWS, GCP, Azure, OCI and others (169.254.169.254), AWS ECS task metadata
 * (169.254.170.2), AWS's IPv6 IMDS (fd00:ec2::254) and Alibaba Cloud (100.100.100.200). They hand out credentials,
 * so only an allow-list entry naming the address itself opens one: a wide CIDR or the `loopback` keyword never does.
 */
const CLOUD_METADATA = ['169.254.169.254', '169.254.170.2', 'fd00:ec2::254', '100.100.100.200'].map((a) =>
  ipaddr.parse(a).toNormalizedString(),
);

const RANGE_CLASS: Readonly<Record<string, AddressClass>> = {
  loopback: 'loopback',
  private: 'private',
  linkLocal: 'link_local',
  carrierGradeNat: 'cgnat',
  uniqueLocal: 'unique_local',
  multicast: 'multicast',
  unspecified: 'unspecified',
  broadcast: 'broadcast',
};

type Address = ipaddr.IPv4 | ipaddr.IPv6;

/** An address as text (`10.0.0.5`, `::1`, `[::1]`, `::ffff:10.0.0.5`), or undefined when it is not one. */
export function parseAddress(text: string): Address | undefined {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  // ipaddr.js also accepts shorthand like "10.1" or "0x7f.1" that a resolver never answers; URL hosts are already
  // normalised by the URL parser, so only the four-part form counts as an IPv4 address here.
  if (!ipaddr.IPv6.isValid(bare) && !ipaddr.IPv4.isValidFourPartDecimal(bare)) return undefined;
  // An IPv4-mapped IPv6 address (::ffff:10.0.0.5) reaches the IPv4 host: classify it as that.
  return ipaddr.process(bare);
}

/** The class an address is refused for, or undefined for an ordinary public unicast address. */
export function addressClass(address: Address): AddressClass | undefined {
  if (CLOUD_METADATA.includes(address.toNormalizedString())) return 'cloud_metadata';
  const range = address.range();
  if (range === 'unicast') return undefined;
  return RANGE_CLASS[range] ?? 'reserved';
}

/** The operator's exceptions: host names (exact, or `*.suffix` for sub-domains) and address ranges. */
export interface EgressAllow {
  hosts: readonly string[];
  /** Sub-domain suffixes from `*.example.com` entries, stored as `.example.com`. */
  suffixes: readonly string[];
  cidrs: readonly (readonly [Address, number])[];
  /** The entries as written, for the banner and messages. */
  entries: readonly string[];
}

export const NO_EGRESS_EXCEPTIONS: EgressAllow = { hosts: [], suffixes: [], cidrs: [], entries: [] };

/** `loopback` stands for the loopback ranges, so a development setup can say what it means in one word. */
const KEYWORDS: Readonly<Record<string, readonly string[]>> = { loopback: ['127.0.0.0/8', '::1/128'] };

const HOST_NAME = /^(?=.{1,253}$)(?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9])?\.)*[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9])?$/;

const FORMS = 'entries are host names, *.domains, IP addresses, CIDRs or the keyword loopback';

const normalHost = (host: string) => host.toLowerCase().replace(/\.$/, '');

/**
 * Parses `KEEL_EGRESS_ALLOW`: comma-separated host names (`hooks.internal`, `*.corp.example`), addresses
 * (`10.0.0.5`, `fd00::1`), CIDRs (`10.20.0.0/16`) and the keyword `loopback`. Throws naming the first bad entry.
 */
export function parseEgressAllow(raw: string | undefined): EgressAllow {
  const entries = (raw ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean);
  const hosts: string[] = [];
  const suffixes: string[] = [];
  const cidrs: (readonly [Address, number])[] = [];
  for (const entry of entries) {
    const keyword = KEYWORDS[entry.toLowerCase()];
    if (keyword) {
      for (const c of keyword) cidrs.push(ipaddr.parseCIDR(c));
      continue;
    }
    const [base = '', bits, ...rest] = entry.split('/');
    if (bits !== undefined) {
      const address = parseAddress(base);
      const prefix = /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
      if (!address || rest.length || !(prefix <= (address.kind() === 'ipv4' ? 32 : 128)))
        throw new Error(`KEEL_EGRESS_ALLOW: \`${entry}\` is not a CIDR like 10.20.0.0/16 or fd00::/64 (${FORMS})`);
      cidrs.push([address, prefix]);
      continue;
    }
    const address = parseAddress(entry);
    if (address) {
      cidrs.push([address, address.kind() === 'ipv4' ? 32 : 128]);
      continue;
    }
    const host = normalHost(entry);
    if (host.startsWith('*.') && HOST_NAME.test(host.slice(2))) suffixes.push(host.slice(1));
    else if (HOST_NAME.test(host)) hosts.push(host);
    else throw new Error(`KEEL_EGRESS_ALLOW: \`${entry}\` is not an entry (${FORMS})`);
  }
  return { hosts, suffixes, cidrs, entries };
}

/** Whether the allow list names this host (exactly, or under a `*.` entry). */
export function hostAllowed(host: string, allow: EgressAllow): boolean {
  const h = normalHost(host.startsWith('[') ? host.slice(1, -1) : host);
  return allow.hosts.includes(h) || allow.suffixes.some((s) => h.endsWith(s));
}

/** Whether this address is inside an allowed range. A cloud metadata address needs an entry of exactly itself. */
export function addressAllowed(address: Address, allow: EgressAllow, cls = addressClass(address)): boolean {
  return allow.cidrs.some(([base, bits]) => {
    if (base.kind() !== address.kind()) return false;
    if (cls === 'cloud_metadata') return bits === (base.kind() === 'ipv4' ? 32 : 128) && sameAddress(base, address);
    return address.match(base, bits);
  });
}

const sameAddress = (a: Address, b: Address) => a.toNormalizedString() === b.toNormalizedString();

/** A refusal: the address and its class, and a message that names the rule and the way out. */
export interface EgressRefusal {
  host: string;
  address: string;
  addressClass: AddressClass;
  message: string;
}

/**
 * The guard's decision for one resolved address of `host`: undefined to connect, or why not. A host named in the
 * allow list passes whatever it resolves to (the operator vouched for it), except to a cloud metadata address.
 */
export function checkAddress(host: string, address: string, allow: EgressAllow): EgressRefusal | undefined {
  const parsed = parseAddress(address);
  // A resolver answers addresses; anything else cannot be connected to safely.
  if (!parsed) return refusal(host, address, 'reserved');
  const cls = addressClass(parsed);
  if (cls === undefined || addressAllowed(parsed, allow, cls)) return undefined;
  if (cls !== 'cloud_metadata' && hostAllowed(host, allow)) return undefined;
  return refusal(host, parsed.toString(), cls);
}

function refusal(host: string, address: string, cls: AddressClass): EgressRefusal {
  const shown = host === address ? address : `${host} (${address})`;
  return {
    host,
    address,
    addressClass: cls,
    message:
      `egress refused: ${shown} is ${ADDRESS_CLASSES[cls]}; Keel connects only to public addresses unless ` +
      `KEEL_EGRESS_ALLOW lists the ${cls === 'cloud_metadata' ? 'address itself' : 'host, address or range'}`,
  };
}

/** Names that always resolve to this machine (RFC 6761), whatever DNS says. */
const LOOPBACK_NAMES = /(^|\.)localhost\.?$/i;

/**
 * The check the API makes on a configured URL before anything resolves: a URL whose host is an address in a refused
 * class, or a `localhost` name, can never pass the guard. A host name that needs DNS is left to the guard at send
 * time (what it resolves to can change). Undefined when the URL may pass (or is no URL: the schema says so).
 */
export function staticEgressCheck(url: string, allow: EgressAllow): EgressRefusal | undefined {
  let host: string;
  try {
    host = new URL(url).hostname;
  } catch {
    return undefined;
  }
  if (LOOPBACK_NAMES.test(host)) {
    if (hostAllowed(host, allow)) return undefined;
    return checkAddress(host, '127.0.0.1', allow);
  }
  if (!parseAddress(host)) return undefined;
  return checkAddress(host, host.startsWith('[') ? host.slice(1, -1) : host, allow);
}

/** The refusal's message for a URL that can never pass the guard, or undefined (see `staticEgressCheck`). */
export function staticEgressRefusal(url: string, allow: EgressAllow): string | undefined {
  return staticEgressCheck(url, allow)?.message;
}

/** One line for a banner or a log: what the guard refuses and what the allow list opens. */
export function describeEgress(allow: EgressAllow): string {
  if (!allow.entries.length)
    return 'public addresses only (private, loopback, link-local, CGNAT, unique-local, multicast, metadata refused)';
  return `public addresses and ${allow.entries.join(', ')} (every other non-public address refused)`;
}

/** An allow list with the `loopback` keyword in it (what `npm start` runs with: its local receivers are loopback). */
export function withLoopback(raw: string | undefined): string {
  const entries = (raw ?? '')
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean);
  return entries.some((e) => e.toLowerCase() === 'loopback') ? entries.join(',') : ['loopback', ...entries].join(',');
}
