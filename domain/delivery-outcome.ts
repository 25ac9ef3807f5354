/**
 * Free of schemas, so that workflows may read it (issue 27).
 *
 * Outcome of one delivery: `delivered`, or a kind with its reason. `skipped` means Keel chose not to send
 * (nothing to send to); `dropped` means the target refused it for good; `error` means retries ran out.
 */
export type DeliveryOutcome = 'delivered' | `skipped:${string}` | `dropped:${string}` | `error:${string}`;

export function outcomeKind(outcome: DeliveryOutcome): 'delivered' | 'skipped' | 'dropped' | 'error' {
  return outcome === 'delivered' ? 'delivered' : (outcome.split(':')[0] as 'skipped' | 'dropped' | 'error');
}
