import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import pg from 'pg';
import { LIMITS } from '../domain/limits';
import { TEXT_TOO_LARGE } from '../domain/messages';
import { redactSecrets } from '../domain/secret-scan';
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
  const answer = dependencyAnswer(err, req);
  const route = routeOf(req);
  const cause = describeError(err);
  // One line that says why, for every answer that is not the client's fault: the request id (in a 500's answer
  // too), the route and the cause, never a body or a header (webhook and tool-server secrets travel there).
  req.log.error(
    { route, status: answer.status, cause },
    `${route} answered ${answer.status}: ${cause.type}: ${cause.message.slice(0, 200)}`,
  );
  return reply.status(answer.status).send(answer.body);
}

type Answer = { status: number; body: ReturnType<typeof errorBody> };

/** The answer to an error that is neither the client's nor one Keel raised on purpose: a dependency's or a bug. */
function dependencyAnswer(err: Error, req: FastifyRequest): Answer {
  // The namespace was there at start (the API checks it): a Temporal server whose own database is restarting
  // answers that it does not know it (seen in the cluster soak, bench/SOAK-cluster.md). A 503 is retried; a 500 is not.
  const missing = namespaceNotFound(err);
  if (missing !== undefined) {
    const why = `Temporal does not find namespace ${missing} now (its database may be restarting); try again`;
    return { status: 503, body: errorBody('unavailable', why) };
  }
  const temporal = temporalStatus(err);
  if (temporal) return temporalError(temporal, req);
  if (isUnavailable(err)) {
    const why = 'a dependency (Temporal or PostgreSQL) is not reachable; try again';
    return { status: 503, body: errorBody('unavailable', why) };
  }
  return internal('internal', 'internal error', req);
}

/** A 500 names its request id, under which the API's log has the cause, so that whoever met it can point to it. */
function internal(code: string, message: string, req: FastifyRequest): Answer {
  const body = errorBody(code, `${message} (request ${req.id}; the API's log says why)`, { requestId: req.id });
  return { status: 500, body };
}

/**
 * Temporal's answer, judged by its gRPC status: not reachable, overloaded or too slow is a 503 to retry; any other
 * status is Temporal refusing a request the API let through (e.g. a namespace without Keel's search attributes), which
 * retrying will not fix, so it is a 500 that says what Temporal said.
 */
function temporalError(t: TemporalStatus, req: FastifyRequest): Answer {
  if (isTemporalUnavailable(t)) {
    const why = `Temporal is not reachable, overloaded or did not answer in time (${t.name}); try again`;
    return { status: 503, body: errorBody('unavailable', why) };
  }
  return internal('temporal_refused', `Temporal refused the request (${t.name}): ${redact(t.details)}`, req);
}

/**
 * Text a dependency's error may have echoed from what it was sent (Temporal's details, PostgreSQL's message, a
 * stack's first line): any secret-looking text is masked, as the reply guard masks it, and it is cut short.
 */
function redact(text: string, max = 500): string {
  const masked = redactSecrets(text).text;
  return masked.length > max ? `${masked.slice(0, max)}…` : masked;
}

/** The route a request matched, as its pattern (`POST /v1/agents/:agentId/evals`): never its values or query. */
export function routeOf(req: FastifyRequest): string {
  return `${req.method} ${req.routeOptions.url ?? '(no route)'}`;
}

/** What the log keeps of an error: what it is and where it came from, masked, never what it was sent. */
export interface ErrorCause {
  /** Its class, e.g. DatabaseError, ServiceError. */
  type: string;
  message: string;
  /** PostgreSQL's SQLSTATE (e.g. 22007), Node's (ECONNREFUSED), a gRPC status number or fastify's code. */
  code?: string | number;
  stack?: string;
  /** PostgreSQL's own fields (pg's DatabaseError): which rule, table, column and part of the statement refused. */
  postgres?: Record<string, string>;
  /** What it wraps (the SDK's ServiceError wraps Temporal's gRPC answer). */
  cause?: ErrorCause;
}

/** PostgreSQL's fields that say where and why; its source file and line and the internal query are left out. */
const POSTGRES_FIELDS = [
  'severity',
  'detail',
  'hint',
  'position',
  'where',
  'schema',
  'table',
  'column',
  'dataType',
  'constraint',
  'routine',
] as const;

/**
 * An error as the log keeps it. Only named fields are read (a gRPC error's metadata may carry credentials), every
 * text is masked, and what PostgreSQL quotes of the statement's values is cut: a row it prints whole ("Failing row
 * contains (…)", a NOT NULL or CHECK violation) and a bound parameter's value ("portal parameter $2 = '…'"); the
 * message keeps the one value it names (`invalid input syntax for type integer: "…"`), masked.
 */
export function describeError(err: unknown, depth = 0): ErrorCause {
  if (!(err instanceof Error)) return { type: typeof err, message: redact(String(err)) };
  const { code, cause } = err as { code?: unknown; cause?: unknown };
  const described: ErrorCause = { type: err.constructor.name || err.name, message: redact(err.message, 2_000) };
  if (typeof code === 'string' || typeof code === 'number') described.code = code;
  if (err.stack) described.stack = redact(err.stack, 4_000);
  if (err instanceof pg.DatabaseError) {
    const postgres: Record<string, string> = {};
    for (const field of POSTGRES_FIELDS) {
      const value = err[field];
      if (value) postgres[field] = redact(value);
    }
    if (postgres.detail?.startsWith('Failing row contains')) postgres.detail = 'Failing row contains (…)';
    // A unique or foreign key's violation quotes the values: the key's columns stay, its values go.
    if (postgres.detail) postgres.detail = postgres.detail.replace(/^(Key \([^)]*\))=[\s\S]*$/, '$1=(…)');
    if (postgres.where) postgres.where = postgres.where.replace(/(portal parameter \$\d+) = '[\s\S]*'/g, '$1 = …');
    described.postgres = postgres;
  }
  if (cause !== undefined && depth < 3) described.cause = describeError(cause, depth + 1);
  return described;
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
