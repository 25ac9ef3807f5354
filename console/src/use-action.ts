import { useCallback, useRef, useState } from 'react';
import { messageOf } from './api';

export interface Action {
  /** Runs `change` unless one is in flight; resolves true when it succeeded. */
  run: (change: () => Promise<void>) => Promise<boolean>;
  pending: boolean;
  error: string | null;
  clearError: () => void;
}

/**
 * A button's request: one at a time (a double click sends once, before React has even disabled the button), its
 * failure kept as words for an alert.
 */
export function useAction(): Action {
  const inFlight = useRef(false);
  const [pending, setPending] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = useCallback(async (change: () => Promise<void>) => {
    if (inFlight.current) return false;
    inFlight.current = true;
    setPending(true);
    setError(null);
    try {
      await change();
      return true;
    } catch (err) {
      setError(messageOf(err));
      return false;
    } finally {
      inFlight.current = false;
      setPending(false);
    }
  }, []);
  const clearError = useCallback(() => setError(null), []);
  return { run, pending, error, clearError };
}
