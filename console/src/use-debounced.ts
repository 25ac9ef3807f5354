import { useEffect, useState } from 'react';

/** Typing pauses this long before a list is asked again. */
export const SEARCH_DELAY_MS = 300;

/** `value` once it has stayed the same for `ms`: a search asks the API when typing pauses, not at each key. */
export function useDebounced<T>(value: T, ms = SEARCH_DELAY_MS): T {
  const [settled, setSettled] = useState(value);
  useEffect(() => {
    const timer = setTimeout(() => setSettled(value), ms);
    return () => clearTimeout(timer);
  }, [value, ms]);
  return settled;
}
