import { lookup } from 'node:dns/promises';
import { Agent, buildConnector, fetch as undiciFetch, type RequestInit as UndiciRequestInit } from 'undici';
import {
  checkAddress,
  describeEgress,
  type AddressClass,
  type EgressAllow,
  type EgressRefusal,
} from '../domain/egress';

/**
 * The egress guard: every outbound HTTP request Keel makes (webhooks, Slack, integrations, the Anthropic API) goes
 * through `guard.fetch`. Its undici connector resolves the host once, checks every address it resolved to
 * (domain/egress.ts), and opens the socket to the address it checked, so a DNS answer that changes between the check
 * and the connection (rebinding) cannot move it. Redirects are never followed: a 3xx answer is an error naming it.
 */

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Resolves a host name to every address it has (the default is the system resolver, as a socket would use). */
export type Resolver = (hostname: string) => Promise<readonly ResolvedAddress[]>;

/** The fetch Keel's outbound calls use: the platform's signature, so SDKs take it as their `fetch`. */
export type GuardedFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

export interface EgressGuard {
  readonly allow: EgressAllow;
  readonly fetch: GuardedFetch;
  /** One line for banners and logs. */
  describe(): string;
  close(): Promise<void>;
}

/** A connection the guard refused; `reason` is the delivery reason `egress_refused:<class>`. */
export class EgressRefusedError extends Error {
  readonly reason: `egress_refused:${AddressClass}`;
  constructor(readonly refusal: EgressRefusal) {
    super(refusal.message);
    this.name = 'EgressRefusedError';
    this.reason = `egress_refused:${refusal.addressClass}`;
  }
}

/** A 3xx answer: the guard does not follow it (the next hop would be a host nobody configured or checked). */
export class EgressRedirectError extends Error {
  readonly reason: `redirect_not_followed:http_${number}`;
  constructor(
    readonly status: number,
    readonly location: string | null,
  ) {
    super(`redirect not followed: ${status}${location ? ` to ${location.slice(0, 200)}` : ''}`);
    this.name = 'EgressRedirectError';
    this.reason = `redirect_not_followed:http_${status}`;
  }
}

/** The guard's own error behind whatever an SDK or fetch wrapped it in, if that is what failed. */
export function egressFailureOf(err: unknown): EgressRefusedError | EgressRedirectError | undefined {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if (e instanceof EgressRefusedError || e instanceof EgressRedirectError) return e;
  }
  return undefined;
}

const systemResolver: Resolver = (hostname) => lookup(hostname, { all: true });

export interface EgressGuardOptions {
  allow: EgressAllow;
  /** Tests answer with addresses of their choosing; the system resolver otherwise. */
  resolve?: Resolver;
  /** The connector that opens sockets once an address passed (undici's by default). */
  connector?: buildConnector.connector;
}

export function createEgressGuard(opts: EgressGuardOptions): EgressGuard {
  const resolve = opts.resolve ?? systemResolver;
  const connect = opts.connector ?? buildConnector({});
  const agent = new Agent({
    connect: (options, callback) => {
      pinnedAddress(options.hostname, resolve, opts.allow)
        // `host` keeps the name, so TLS still sends it as SNI and checks the certificate against it.
        .then((address) => connect({ ...options, hostname: address }, callback))
        .catch((err: unknown) => callback(err instanceof Error ? err : new Error(String(err)), null));
    },
  });

  const guardedFetch: GuardedFetch = async (input, init) => {
    if (typeof input !== 'string' && !(input instanceof URL))
      throw new TypeError('the egress guard fetches a URL, not a Request');
    const response = await undiciFetch(input, {
      // The platform's RequestInit and undici's differ only in their declarations (undici reads bodies by shape).
      ...(init as UndiciRequestInit),
      dispatcher: agent,
      redirect: 'manual',
    });
    if (response.status >= 300 && response.status < 400 && response.status !== 304) {
      // The body is not read: release the connection.
      await response.body?.cancel().catch(() => undefined);
      throw new EgressRedirectError(response.status, response.headers.get('location'));
    }
    return response;
  };

  return {
    allow: opts.allow,
    fetch: guardedFetch,
    describe: () => describeEgress(opts.allow),
    close: () => agent.close(),
  };
}

/**
 * The address to connect to: every address the host resolves to must pass (a name that answers one public and one
 * private address is refused, since which one a socket picks is not the check's to choose), then the first is used.
 */
async function pinnedAddress(hostname: string, resolve: Resolver, allow: EgressAllow): Promise<string> {
  const literal = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  const addresses = isAddress(literal) ? [literal] : (await resolve(hostname)).map((a) => a.address);
  if (addresses.length === 0) throw new Error(`${hostname} resolved to no address`);
  for (const address of addresses) {
    const refused = checkAddress(hostname, address, allow);
    if (refused) throw new EgressRefusedError(refused);
  }
  return addresses[0]!;
}

const isAddress = (host: string) => /^[\d.]+$/.test(host) || host.includes(':');
