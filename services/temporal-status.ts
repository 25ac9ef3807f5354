import { status } from '@grpc/grpc-js';
import {
  isGrpcServiceError,
  NamespaceNotFoundError,
  ServiceError,
  WorkflowUpdateRPCTimeoutOrCancelledError,
} from '@temporalio/client';

export interface TemporalStatus {
  code: status;
  /** The status's name, e.g. INVALID_ARGUMENT. */
  name: string;
  /** Temporal's own words for it (the gRPC details; never the call's metadata, which may carry credentials). */
  details: string;
}

/**
 * The gRPC status Temporal answered a call with: the error itself (a raw service call) or the cause of the SDK's
 * ServiceError. Undefined for anything that is not Temporal's answer.
 */
export function temporalStatus(err: unknown): TemporalStatus | undefined {
  const cause = err instanceof ServiceError ? err.cause : undefined;
  const grpc = isGrpcServiceError(err) ? err : isGrpcServiceError(cause) ? cause : undefined;
  if (!grpc) return undefined;
  // The worker's NativeConnection leaves details empty and puts Temporal's words in the message, after "3 NAME: ".
  const details = grpc.details || grpc.message.replace(/^\d+ [A-Z_]+: /, '');
  return { code: grpc.code, name: status[grpc.code] ?? `status ${grpc.code}`, details };
}

/** The statuses that mean "not now" rather than "no": the same call may well succeed later. */
const UNAVAILABLE = new Set([
  status.UNAVAILABLE,
  status.RESOURCE_EXHAUSTED,
  status.DEADLINE_EXCEEDED,
  status.CANCELLED,
]);

/**
 * Temporal could not be reached, was overloaded (rate limits) or did not answer in time (the caller's deadline
 * cancels the call): the same call may well succeed later (the SDK has already retried the first two).
 */
export function isTemporalUnavailable(s: TemporalStatus): boolean {
  return UNAVAILABLE.has(s.code);
}

/**
 * The one rule for "Temporal is unavailable", for any error a Temporal call threw: its status says so, an Update did
 * not complete within the deadline, or the connection failed before Temporal answered with any status.
 */
export function temporalUnavailable(err: unknown): boolean {
  if (err instanceof WorkflowUpdateRPCTimeoutOrCancelledError) return true;
  const s = temporalStatus(err);
  return s ? isTemporalUnavailable(s) : err instanceof ServiceError;
}

/**
 * The namespace Temporal answered it does not know, however the SDK passed that on: its NamespaceNotFoundError, or,
 * from an update-with-start, a plain Error carrying the operation's status message. A Temporal server whose own
 * database is restarting answers so for a namespace that exists (seen in the cluster soak, bench/SOAK-cluster.md).
 */
export function namespaceNotFound(err: unknown): string | undefined {
  if (err instanceof NamespaceNotFoundError) return err.namespace;
  const said = temporalStatus(err)?.details ?? (err instanceof Error ? err.message : '');
  return /^Namespace (\S+) is not found\.?$/.exec(said)?.[1];
}
