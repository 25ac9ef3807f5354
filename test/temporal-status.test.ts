import { status } from '@grpc/grpc-js';
import { ServiceError, WorkflowUpdateRPCTimeoutOrCancelledError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { temporalUnavailable } from '../services/temporal-status';

/**
 * The one "Temporal is unavailable" rule (issue 25): every route answers 503 `unavailable` for what it says yes to,
 * and 500 `temporal_refused` with Temporal's words for the rest. Two routes used to differ: the submission took a
 * CANCELLED status (what the caller's own deadline makes of a call) as unavailable, the others as a refusal; and
 * RESOURCE_EXHAUSTED (rate limited) was a refusal for the submission only. Both are "not now", everywhere now.
 */
function grpcError(code: status, details: string): Error {
  return Object.assign(new Error(`${code} ${status[code]}: ${details}`), { code, details, metadata: {} });
}

describe('temporalUnavailable', () => {
  it.each([
    ['UNAVAILABLE', status.UNAVAILABLE],
    ['DEADLINE_EXCEEDED', status.DEADLINE_EXCEEDED],
    ['CANCELLED (the caller’s deadline)', status.CANCELLED],
    ['RESOURCE_EXHAUSTED (rate limited)', status.RESOURCE_EXHAUSTED],
  ])('%s is unavailable, raw and wrapped in the SDK’s ServiceError', (_name, code) => {
    const raw = grpcError(code, 'not now');
    expect(temporalUnavailable(raw)).toBe(true);
    expect(temporalUnavailable(new ServiceError('call failed', { cause: raw }))).toBe(true);
  });

  it.each([
    ['INVALID_ARGUMENT', status.INVALID_ARGUMENT],
    ['NOT_FOUND', status.NOT_FOUND],
    ['ALREADY_EXISTS', status.ALREADY_EXISTS],
    ['PERMISSION_DENIED', status.PERMISSION_DENIED],
  ])('%s is a refusal, not unavailability', (_name, code) => {
    expect(temporalUnavailable(grpcError(code, 'no'))).toBe(false);
    expect(temporalUnavailable(new ServiceError('call failed', { cause: grpcError(code, 'no') }))).toBe(false);
  });

  it('an Update not completed in time, or a connection that failed before any status, is unavailable', () => {
    expect(temporalUnavailable(new WorkflowUpdateRPCTimeoutOrCancelledError('timed out'))).toBe(true);
    expect(temporalUnavailable(new ServiceError('connection failed'))).toBe(true);
    expect(temporalUnavailable(new Error('something else'))).toBe(false);
  });
});
