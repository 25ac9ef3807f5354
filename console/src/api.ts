import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from './api-schema.gen';
import { readToken } from './session';

/**
 * The console's one way to Keel's REST API: a client typed by the API's OpenAPI document (openapi-fetch over the
 * generated `paths`), on the same routes curl uses, with the session's bearer token in the Authorization header
 * (never in a URL), and every error as the words the API gave.
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

let onUnauthorized: (message: string) => void = () => undefined;

/** Who hears that the API refused the token (401), wherever it happened: the app then asks to sign in again. */
export function setUnauthorizedHandler(handler: (message: string) => void): void {
  onUnauthorized = handler;
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

/** The session's token on each request; an answer that is not 2xx, or no answer, thrown as an ApiError. */
const session: Middleware = {
  onRequest({ request }) {
    for (const [name, value] of Object.entries(authHeaders())) request.headers.set(name, value);
    return request;
  },
  async onResponse({ response }) {
    if (!response.ok) throw await errorOf(response);
  },
  onError({ error, request }) {
    // A request the console gave up on (the view moved on) stays a cancellation.
    if (request.signal.aborted) return;
    return new ApiError(
      0,
      'network',
      `Keel's API did not answer (${error instanceof Error ? error.message : 'no reply'})`,
    );
  },
};

/** The query parameters that have a value: an empty search or filter is none. */
function querySerializer(query: Record<string, unknown>): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query))
    if (typeof value === 'number' || (typeof value === 'string' && value !== '')) params.set(name, String(value));
  return params.toString();
}

export const api = createClient<paths>({ headers: { accept: 'application/json' }, cache: 'no-store', querySerializer });
api.use(session);

/**
 * What a request answered. Only a 2xx answer gets here (the middleware throws the others), so its body is there,
 * of the type the route's schema says.
 */
export async function answer<T>(request: Promise<{ data?: T }>): Promise<T> {
  return (await request).data as T;
}

/** Any failure as words for a person. */
export function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  return String(err);
}
