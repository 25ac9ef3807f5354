/** A failure in words, announced at once (role="alert"): the API's own message, or what did not answer. */
export function ErrorAlert({ error }: { error: string | null | undefined }) {
  if (!error) return null;
  return (
    <p role="alert" className="alert">
      {error}
    </p>
  );
}
