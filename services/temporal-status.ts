import { status } from '@grpc/grpc-js';
import { isGrpcServiceError, ServiceError } from '@temporalio/client';

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

/**
 * Temporal could not be reached, was overloaded (rate limits) or did not answer in time: the same call may well
 * succeed later (the SDK has already retried the first two).
 */
export function isTemporalUnavailable(s: TemporalStatus): boolean {
  return s.code === status.UNAVAILABLE || s.code === status.RESOURCE_EXHAUSTED || s.code === status.DEADLINE_EXCEEDED;
}
