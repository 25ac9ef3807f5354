import { ApplicationFailure } from '@temporalio/common';
import type { OutboundMessage, Transport, Transports } from '../adapters/delivery/transport';
import {
  beginDeliveryAttempt,
  beginReplyDeliveryAttempt,
  recordDeliveryError,
  recordDeliveryOutcome,
} from '../db/deliveries';
import type { Effect } from '../db/effects';
import type { Pool } from '../db/pool';
import type {
  DeliverReplyInput,
  Delivery,
  DeliveryOutcome,
  DeliveryReport,
  ReplyBlocked,
  SendResult,
} from '../domain/delivery';
import { FAILURE } from '../domain/failures';
import { LIMITS } from '../domain/limits';
import { checkReply, guardErrorForModel } from '../domain/reply-guard';
import { heartbeatWhile, type Step } from './step';

/** Reasons that mean "nothing to send to" rather than "the target refused it". */
const SKIP_REASONS = new Set(['channel_none', 'slack_not_configured']);

/**
 * The reply guard, in the delivery's step when the workflow gives its rules (GUARD_IN_DELIVERY_PATCH): a blocked reply
 * is answered with the verdict the model reads, and nothing is written or sent.
 */
export function replyBlocked(input: DeliverReplyInput): ReplyBlocked | undefined {
  if (!input.guard) return undefined;
  const verdict = checkReply(input.text, { rules: input.guard });
  return verdict.ok ? undefined : { blocked: { message: guardErrorForModel(verdict), detail: verdict.detail } };
}

/**
 * Sends a reply once. The effect is in the ledger before it is sent; a settled effect is answered from the ledger, so
 * neither a retry nor a replay sends twice. Send attempts are counted in the ledger, not by Temporal, so that a
 * database outage does not use them up.
 */
export async function deliverReply(
  pool: Pool,
  transports: Transports,
  input: DeliverReplyInput,
  step: Pick<Step, 'signal' | 'heartbeat'>,
): Promise<DeliveryReport> {
  const { effectKey, conversationKey, turnId, replySeq, text } = input;
  const begun = await beginReplyDeliveryAttempt(pool, { effectKey, conversationKey, turnId, replySeq, text });
  if (!begun) throw ApplicationFailure.nonRetryable(`turn ${input.turnId} not found`, FAILURE.turnMissing);
  const report = await sendBegun(pool, transports, begun.effect, {
    effectKey: input.effectKey,
    target: begun.target,
    message: {
      agentId: input.agentId,
      conversationId: input.conversationId,
      turnId: input.turnId,
      text: input.text,
      idempotencyKey: input.effectKey,
    },
    ...step,
    // Heard with the outcome's own statement: a reply settled by an earlier attempt was heard then.
    announce: (r) => ({
      key: input.conversationKey,
      type: 'reply.delivered',
      about: [input.effectKey],
      data: { turnId: input.turnId, outcome: r.outcome, attempts: r.attempts },
    }),
  });
  return report;
}

/**
 * One delivery through the effects ledger, for a reply, a job's result or a notice alike: a retryable failure throws
 * for Temporal to retry until the ledger's attempts run out, then the outcome is recorded as `error:*`.
 */
export async function deliverOnce(
  pool: Pool,
  transports: Transports,
  d: {
    effectKey: string;
    conversationKey: string | null;
    turnId: string | null;
    target: Delivery;
    message: OutboundMessage;
    /** The step's cancellation, which ends a send in flight. */
    signal: AbortSignal;
    /** Heartbeats while the transport waits (up to its 10 s timeout); a caller that heartbeats itself passes none. */
    heartbeat?: () => void;
    /** The conversation event that announces the outcome, recorded with it. */
    announce?: (report: DeliveryReport) => Parameters<typeof recordDeliveryOutcome>[5];
  },
): Promise<DeliveryReport> {
  const effect = await beginDeliveryAttempt(pool, {
    effectKey: d.effectKey,
    conversationKey: d.conversationKey,
    turnId: d.turnId,
    target: d.target,
    text: d.message.text,
  });
  return sendBegun(pool, transports, effect, d);
}

/** A delivery's attempt, begun: sent unless an earlier attempt settled it, and its outcome recorded. */
async function sendBegun(
  pool: Pool,
  transports: Transports,
  effect: Effect<DeliveryReport>,
  d: Omit<Parameters<typeof deliverOnce>[2], 'conversationKey' | 'turnId'>,
): Promise<DeliveryReport> {
  if (effect.status !== 'pending' && effect.result) return effect.result;

  const sending = send(transports, d.target, d.message, d.signal);
  const result = d.heartbeat ? await heartbeatWhile(sending, d.heartbeat) : await sending;

  if (!result.ok && result.retryable && effect.attempts < LIMITS.deliveryAttempts) {
    await recordDeliveryError(pool, d.effectKey, result.reason);
    const message = `delivery attempt ${effect.attempts} failed: ${result.reason}`;
    throw ApplicationFailure.retryable(message, FAILURE.deliveryRetryable);
  }
  const outcome = outcomeOf(result);
  const report: DeliveryReport = { outcome, attempts: effect.attempts };
  const status = result.ok || outcome.startsWith('skipped') ? 'done' : 'failed';
  const error = result.ok ? undefined : result.reason;
  await recordDeliveryOutcome(pool, d.effectKey, outcome, error, { status, report }, d.announce?.(report));
  return report;
}

function send(
  transports: Transports,
  target: Delivery,
  message: Parameters<Transport['send']>[1],
  signal: AbortSignal,
): Promise<SendResult> {
  switch (target.channel) {
    case 'none':
      return transports.none.send(target, message, signal);
    case 'webhook':
      return transports.webhook.send(target, message, signal);
    case 'slack':
      return transports.slack.send(target, message, signal);
  }
}

function outcomeOf(result: SendResult): DeliveryOutcome {
  if (result.ok) return 'delivered';
  if (SKIP_REASONS.has(result.reason)) return `skipped:${result.reason}`;
  return result.retryable ? `error:${result.reason}` : `dropped:${result.reason}`;
}
