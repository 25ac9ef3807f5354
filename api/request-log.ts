import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';
import { describeError, routeOf } from './errors';

/**
 * How the API logs its requests: one line per request at debug (a terminal at info shows warnings, errors and what
 * Keel did, not traffic), none for /healthz (polled by health checks all day long). An answer that failed is an error
 * line described as the error handler describes one (api/errors.ts): its route and cause, masked, never its body.
 */
export class RequestLog extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) {
      const route = routeOf(request);
      const cause = describeError(error);
      // A client that hung up (an event stream closed, a request given up on) is not a fault of the API's.
      const hungUp = cause.code === 'ECONNRESET' || cause.code === 'ERR_STREAM_PREMATURE_CLOSE';
      reply.log[hungUp ? 'info' : 'error']({ route, res: reply, cause }, `${route}: the answer failed`);
      return;
    }
    if (request.routeOptions.url === '/healthz') return;
    reply.log.debug({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
}
