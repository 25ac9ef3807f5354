import type { EvalHead } from './api-types';

/** An evaluation's counts once it ended; null while it runs or when it failed before its cases ran. */
export function evalCounts(e: Pick<EvalHead, 'summary'>) {
  return e.summary && 'cases' in e.summary ? e.summary : null;
}

/** Why an evaluation failed as a whole, when it did. */
export function evalError(e: Pick<EvalHead, 'summary'>): string | null {
  return e.summary && 'error' in e.summary ? e.summary.error : null;
}
