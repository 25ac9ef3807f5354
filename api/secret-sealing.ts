import type { FastifyInstance } from 'fastify';
import { sealSecretsIn } from '../services/delivery-secrets';
import { SecretsUnavailableError, type SecretBox } from '../services/secrets';
import { ApiError } from './errors';

/**
 * Every webhook secret a request body carries is sealed once the body is validated, before any route sees it: a
 * Delivery is accepted by several routes (an agent's owner and destinations, a message, a job, a routine), and a
 * route added later stores none in clear either. Without KEEL_SECRETS_KEY a secret is refused, saying so.
 */
export function registerSecretSealing(app: FastifyInstance, secrets: SecretBox): void {
  app.addHook('preHandler', async (req) => {
    if (req.body === undefined || req.body === null) return;
    try {
      req.body = sealSecretsIn(secrets, req.body);
    } catch (err) {
      if (err instanceof SecretsUnavailableError) throw new ApiError(503, 'secrets_unavailable', err.message);
      throw err;
    }
  });
}
