import {
  LogLevel,
  WebAPIHTTPError,
  WebAPIPlatformError,
  WebAPIRateLimitedError,
  WebAPIRequestError,
  WebClient,
  type FetchFunction,
} from '@slack/web-api';
import type { Delivery, SendResult } from '../../domain/delivery';
import { egressFailureOf, type EgressGuard } from '../egress';
import type { OutboundMessage, Transport } from './transport';

type SlackDelivery = Extract<Delivery, { channel: 'slack' }>;

const DEFAULT_API_URL = 'https://slack.com/api/';
const TIMEOUT_MS = 10_000;

/** Slack platform errors that describe a passing condition on Slack's side, so a later attempt can succeed. */
const TRANSIENT_PLATFORM_ERRORS = new Set([
  'internal_error',
  'fatal_error',
  'service_unavailable',
  'request_timeout',
  // Slack says the workspace is intermittently unavailable while it migrates into an Enterprise org.
  'team_added_to_org',
]);

/**
 * Sends the reply with chat.postMessage to a channel (`C…`), a user (`U…`, Slack opens the DM) or the agent's
 * owner. One HTTP call per send: Temporal owns retries, so the Slack client is built never to retry or wait.
 */
export function slackTransport(opts: {
  token?: string;
  apiUrl?: string;
  owner?: string;
  egress: EgressGuard;
}): Transport<SlackDelivery> {
  const token = opts.token === '' ? undefined : opts.token;
  // The SDK concatenates the method name onto the base URL, so it must end with '/'.
  const base = opts.apiUrl ?? DEFAULT_API_URL;
  const slackApiUrl = base.endsWith('/') ? base : `${base}/`;
  const { egress } = opts;

  return {
    channel: 'slack',
    async send(target: SlackDelivery, message: OutboundMessage, signal: AbortSignal): Promise<SendResult> {
      signal.throwIfAborted();
      if (token === undefined) return { ok: false, retryable: false, reason: 'slack_not_configured' };
      const channel = target.target === 'owner' ? opts.owner : target.target;
      if (channel === undefined || channel === '') return { ok: false, retryable: false, reason: 'owner_unknown' };

      // The SDK has no per-call AbortSignal, so the caller's signal is joined to the SDK's own timeout signal in
      // its fetch hook. A client per send keeps that signal from leaking between concurrent sends; it is cheap.
      // The request goes through the egress guard, like every outbound request (KEEL_SLACK_API_URL included).
      const fetchWithSignal: FetchFunction = (url, init) =>
        egress.fetch(url, { ...init, signal: init?.signal ? AbortSignal.any([init.signal, signal]) : signal });
      const client = new WebClient(token, {
        slackApiUrl,
        retryConfig: { retries: 0 },
        // Without this the SDK sleeps for Retry-After and tries again inside the activity.
        rejectRateLimitedCalls: true,
        timeout: TIMEOUT_MS,
        // Outcomes are reported through SendResult; the SDK's own warnings would only duplicate them.
        logLevel: LogLevel.ERROR,
        fetch: fetchWithSignal,
      });

      try {
        const result = await client.chat.postMessage({ channel, text: message.text });
        return result.ts === undefined ? { ok: true } : { ok: true, detail: result.ts };
      } catch (err) {
        // Cancellation is not a delivery failure: let it propagate so the activity ends as cancelled.
        if (signal.aborted) signal.throwIfAborted();
        return classifySlackError(err);
      }
    },
  };
}

function classifySlackError(err: unknown): SendResult {
  // A refused address or a redirect is the same on every attempt: dropped, naming why.
  const refused = egressFailureOf(err instanceof WebAPIRequestError ? err.original : err);
  if (refused) return { ok: false, retryable: false, reason: refused.reason };
  if (err instanceof WebAPIRateLimitedError) return { ok: false, retryable: true, reason: 'rate_limited' };

  if (err instanceof WebAPIPlatformError) {
    const code = err.data.error;
    if (code === 'ratelimited') return { ok: false, retryable: true, reason: 'rate_limited' };
    // The SDK puts the raw body here when a 200 response was not JSON (a proxy page, say): a glitch, not a verdict.
    if (!/^[a-z0-9_.]{1,64}$/.test(code)) return { ok: false, retryable: true, reason: 'invalid_response' };
    // Everything else (channel_not_found, not_in_channel, invalid_auth, is_archived, msg_too_long, …) is Slack's
    // final answer about this request: repeating it cannot change the outcome.
    return { ok: false, retryable: TRANSIENT_PLATFORM_ERRORS.has(code), reason: code };
  }

  if (err instanceof WebAPIHTTPError) {
    const status = err.statusCode;
    const retryable = status === 408 || status === 425 || status === 429 || status >= 500;
    return { ok: false, retryable, reason: `http_${status}` };
  }

  if (err instanceof WebAPIRequestError) {
    const timedOut = err.original.name === 'TimeoutError';
    return { ok: false, retryable: true, reason: timedOut ? 'timeout' : 'network' };
  }

  // A 429 without a usable Retry-After header surfaces as a plain Error from the SDK.
  if (err instanceof Error && err.message.startsWith('Retry header did not contain')) {
    return { ok: false, retryable: true, reason: 'rate_limited' };
  }
  // Unknown failure inside the SDK: retrying is bounded by the Temporal policy and ends as error:unexpected_error.
  return { ok: false, retryable: true, reason: 'unexpected_error' };
}
