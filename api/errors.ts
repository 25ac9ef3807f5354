import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { LIMITS } from '../domain/limits';
import { TEXT_TOO_LARGE } from '../domain/messages';
import { SECRET_PATTERNS } from '../domain/reply-guard';
import {
  isTemporalUnavailable,
  namespaceNotFound,
  temporalStatus,
  type TemporalStatus,
} from '../services/temporal-status';

/** The API's one error shape: {"error": {"code", "message", "details"?}} with the matching status. */
export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

export const notFound = (what: string) => new ApiError(404, 'not_found', `${what} not found`);

/** The API is closing: the client retries (elsewhere, or once it is back); `why` says what to retry. */
export const shuttingDown = (why = 'retry the request', details?: unknown) =>
  new ApiError(503, 'shutting_down', `the API is shutting down; ${why}`, details);

export function errorBody(code: string, message: string, details?: unknown) {
  return { error: { code, message, ...(details === undefined ? {} : { details }) } };
}

export function handleError(
  err: FastifyError | ApiError | Error,
  req: FastifyRequest,
  reply: FastifyReply,
): FastifyReply {
  if (err instanceof ApiError) return reply.status(err.statusCode).send(errorBody(err.code, err.message, err.details));
  if (hasZodFastifySchemaValidationErrors(err)) {
    const issues = err.validation.map((v) => ({ path: v.instancePath, message: v.message, code: v.keyword }));
    const tooLarge = err.validation.some(
      (v) => (v.params as { params?: { keelCode?: string } }).params?.keelCode === TEXT_TOO_LARGE,
    );
    if (tooLarge) return reply.status(413).send(errorBody('text_too_large', 'text is larger than 32 KiB', issues));
    const where = (err as { validationContext?: string }).validationContext ?? 'body';
    const first = issues[0];
    return reply
      .status(400)
      .send(
        errorBody(
          'invalid_request',
          `invalid ${where}${first ? `: ${first.path || '/'} ${first.message}` : ''}`,
          issues,
        ),
      );
  }
  const fe = err as FastifyError;
  switch (fe.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return reply.status(413).send(errorBody('body_too_large', 'request body is larger than 1 MiB'));
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return reply.status(400).send(errorBody('invalid_json', `request body is not valid JSON: ${fe.message}`));
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return reply.status(415).send(errorBody('unsupported_media_type', 'send application/json'));
  }
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
    return reply.status(fe.statusCode).send(errorBody('bad_request', fe.message));
  }
  req.log.error({ err }, 'request failed');
  // The namespace was there at start (the API checks it): a Temporal server whose own database is restarting
  // answers that it does not know it (seen in the cluster soak, bench/SOAK-cluster.md). A 503 is retried; a 500 is not.
  const missing = namespaceNotFound(err);
  if (missing !== undefined) {
    const why = `Temporal does not find namespace ${missing} now (its database may be restarting); try again`;
    return reply.status(503).send(errorBody('unavailable', why));
  }
  const temporal = temporalStatus(err);
  if (temporal) return temporalError(reply, temporal);
  if (isUnavailable(err))
    return reply
      .status(503)
      .send(errorBody('unavailable', 'a dependency (Temporal or PostgreSQL) is not reachable; try again'));
  return reply.status(500).send(errorBody('internal', 'internal error'));
}

/**
 * Temporal's answer, judged by its gRPC status: not reachable, overloaded or too slow is a 503 to retry; any other
 * status is Temporal refusing a request the API let through (e.g. a namespace without Keel's search attributes), which
 * retrying will not fix, so it is a 500 that says what Temporal said.
 */
function temporalError(reply: FastifyReply, t: TemporalStatus): FastifyReply {
  if (isTemporalUnavailable(t)) {
    const why = `Temporal is not reachable, overloaded or did not answer in time (${t.name}); try again`;
    return reply.status(503).send(errorBody('unavailable', why));
  }
  const refused = `Temporal refused the request (${t.name}): ${redact(t.details)}`;
  return reply.status(500).send(errorBody('temporal_refused', refused));
}

/** Temporal's message may echo what it was sent; it is cut short and any secret-looking text is masked. */
function redact(text: string): string {
  const masked = SECRET_PATTERNS.reduce((t, { pattern }) => t.replace(new RegExp(pattern, 'g'), '[redacted]'), text);
  return masked.length > 500 ? `${masked.slice(0, 500)}…` : masked;
}

/** The router's own refusals (a malformed or overlong path), in the API's error shape too. */
export function handleRouterError(err: FastifyError, _req: FastifyRequest, reply: FastifyReply): void {
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH')
    void reply
      .status(414)
      .send(errorBody('uri_too_long', `a path segment is longer than ${LIMITS.pathParamChars} characters`));
  else void reply.status(400).send(errorBody('bad_request', err.message));
}

/**
 * Connection failures of PostgreSQL (or of Temporal before any gRPC status, e.g. its first connect): the client should
 * retry, nothing was lost. An answer of Temporal's is judged by its status in temporalError instead.
 */
function isUnavailable(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  const msg = err instanceof Error ? err.message : '';
  return (
    code === 'ECONNREFUSED' ||
    code === '57P01' ||
    code === '57P03' ||
    /Connection terminated|connect ECONNREFUSED|timeout exceeded when trying to connect/i.test(msg) ||
    /UNAVAILABLE|DEADLINE_EXCEEDED/i.test(msg)
  );
}
