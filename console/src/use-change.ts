import { useMutation, type UseMutationOptions } from '@tanstack/react-query';
import { useCallback, useRef } from 'react';

/**
 * A person's change through the API: TanStack Query's useMutation, sent once however fast its button is pressed. A
 * mutation's isPending reaches React only after the click, so a double click would send twice before the button is
 * disabled; `send` ignores a second call while the first is in flight.
 */
export function useChange<TVariables = void, TData = unknown>(options: UseMutationOptions<TData, Error, TVariables>) {
  const mutation = useMutation(options);
  const inFlight = useRef(false);
  const { mutateAsync } = mutation;
  const send = useCallback(
    (variables: TVariables) => {
      if (inFlight.current) return;
      inFlight.current = true;
      // The failure is the mutation's `error`, shown by the caller.
      mutateAsync(variables)
        .catch(() => undefined)
        .finally(() => {
          inFlight.current = false;
        });
    },
    [mutateAsync],
  );
  return { ...mutation, send };
}
