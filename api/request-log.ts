import { LogController, type FastifyReply, type FastifyRequest } from 'fastify';

/**
 * How the API logs its requests: one line per request at debug (a terminal at info shows warnings, errors and what
 * Keel did, not traffic), none for /healthz (polled by health checks all day long), errors as fastify logs them.
 */
export class RequestLog extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) return super.requestCompleted(error, request, reply);
    if (request.routeOptions.url === '/healthz') return;
    reply.log.debug({ req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
}
