import { useId, useState } from 'react';
import { ErrorAlert } from './error-alert';

/** The token form, shown when the API answers 401: a token of KEEL_API_TOKENS, kept for this tab only. */
export function SignIn({ error, onSignIn }: { error: string | null; onSignIn: (token: string) => Promise<void> }) {
  const tokenId = useId();
  const [token, setToken] = useState('');
  const [pending, setPending] = useState(false);
  return (
    <section aria-labelledby="sign-in-heading" className="sign-in card">
      <h2 id="sign-in-heading">Sign in to Keel</h2>
      <p>This Keel asks for an API token: one of those in its KEEL_API_TOKENS.</p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (pending) return;
          setPending(true);
          void onSignIn(token.trim()).finally(() => setPending(false));
        }}
      >
        <div className="field">
          <label htmlFor={tokenId}>API token</label>
          <input
            id={tokenId}
            type="password"
            autoComplete="off"
            spellCheck={false}
            value={token}
            onChange={(e) => setToken(e.target.value)}
          />
        </div>
        <button type="submit" className="button primary" disabled={pending}>
          Sign in
        </button>
      </form>
      <ErrorAlert error={error} />
    </section>
  );
}
