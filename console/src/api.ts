import type { Page } from './api-types';
import { readToken } from './session';

/**
 * The console's one way to Keel's REST API: the same routes curl uses, with the session's bearer token in the
 * Authorization header (never in a URL), and every error as the words the API gave.
 */

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

let onUnauthorized: (message: string) => void = () => undefined;

/** Who hears that the API refused the token (401), wherever it happened: the app then asks to sign in again. */
export function setUnauthorizedHandler(handler: (message: string) => void): void {
  onUnauthorized = handler;
}

/** A path under /v1 from its segments, each one encoded: ids come from people and agents. */
export function apiPath(...segments: (string | number)[]): string {
  return `/v1/${segments.map((s) => encodeURIComponent(String(s))).join('/')}`;
}

/** `path` with a query string of the parameters that have a value. */
export function withQuery(path: string, query: Record<string, string | number | null | undefined>): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') params.set(k, String(v));
  const q = params.toString();
  return q ? `${path}?${q}` : path;
}

/** The headers every request carries: the token when there is one. */
export function authHeaders(): Record<string, string> {
  const token = readToken();
  return token ? { authorization: `Bearer ${token}` } : {};
}

function isErrorBody(body: unknown): body is { error: { code: string; message: string } } {
  if (typeof body !== 'object' || body === null || !('error' in body)) return false;
  const e = body.error;
  return typeof e === 'object' && e !== null && typeof (e as { message?: unknown }).message === 'string';
}

/** An answer that is not 2xx, in words: the API's error message, or the status when the body has none. */
export async function errorOf(res: Response): Promise<ApiError> {
  const text = await res.text().catch(() => '');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const error = isErrorBody(body)
    ? new ApiError(res.status, body.error.code, body.error.message)
    : new ApiError(res.status, 'http', `the API answered ${res.status} ${res.statusText}`.trim());
  if (res.status === 401) onUnauthorized(error.message);
  return error;
}

export async function request<T>(method: Method, path: string, body?: unknown, signal?: AbortSignal): Promise<T> {
  const headers: Record<string, string> = { accept: 'application/json', ...authHeaders() };
  // No body at all when there is none: fastify refuses an empty body sent as JSON.
  if (body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      signal,
      cache: 'no-store',
    });
  } catch (err) {
    if (signal?.aborted) throw err;
    throw new ApiError(0, 'network', `Keel's API did not answer (${err instanceof Error ? err.message : 'no reply'})`);
  }
  if (!res.ok) throw await errorOf(res);
  if (res.status === 204) return undefined as T;
  return (await res.json()) as T;
}

export const get = <T>(path: string, signal?: AbortSignal) => request<T>('GET', path, undefined, signal);
export const post = <T>(path: string, body?: unknown) => request<T>('POST', path, body);

/**
 * One page of a list: `{items, nextCursor}` with `cursor` and `limit`. A list route that still answers a plain array
 * is one page with nothing after it.
 */
export async function getPage<T>(
  path: string,
  query: Record<string, string | number | null | undefined>,
  cursor: string | null,
  signal?: AbortSignal,
): Promise<Page<T>> {
  const answer = await get<Page<T> | T[]>(withQuery(path, { ...query, cursor }), signal);
  return Array.isArray(answer) ? { items: answer, nextCursor: null } : answer;
}

/** Any failure as words for a person. */
export function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
