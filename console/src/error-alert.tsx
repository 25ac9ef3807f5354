import { messageOf } from './api';

/**
 * A failure in words, announced at once (role="alert"): the API's own message, or what did not answer. Takes a
 * query's or a change's error as it is, or words.
 */
export function ErrorAlert({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p role="alert" className="alert">
      {typeof error === 'string' ? error : messageOf(error)}
    </p>
  );
}
