/**
 * The checks of histories recorded before they moved into activities (history-checks.ts), loaded the first time such
 * a history needs one. The SDK evaluates a bundle's imported modules once for each workflow it caches, so an import
 * would build every schema and secret rule in each conversation; required here, only those histories pay for them.
 */
import type { ToolInputErrors, ToolUseBlock } from '../domain/model';
import type * as HistoryChecks from './history-checks';

export function olderChecks(): typeof HistoryChecks {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on first use, never with the bundle
  return require('./history-checks') as typeof HistoryChecks;
}

/**
 * A call of Keel's own tools as the workflow takes it: the model step checked its input against the tool's schema
 * (its verdict, the input as parsed); a step recorded before it did is checked here, as it was then.
 */
export function checkedInput(
  call: ToolUseBlock,
  inputErrors: ToolInputErrors | undefined,
  offered: readonly string[],
): { ok: true; input: unknown } | { ok: false; error: string } {
  if (!inputErrors) return olderChecks().parseToolCall(call, offered);
  const error = inputErrors[call.id];
  return error === undefined ? { ok: true, input: call.input } : { ok: false, error };
}
