import { createEgressGuard } from '../../adapters/egress';
import { parseEgressAllow } from '../../domain/egress';

/** Tests allow loopback explicitly: their webhook receivers, fake Slack and integrations listen on 127.0.0.1. */
export const LOOPBACK_ALLOW = parseEgressAllow('loopback');

/** One guard for the tests that build transports or providers of their own; no test connects anywhere else. */
export const loopbackEgress = createEgressGuard({ allow: LOOPBACK_ALLOW });
