import { useQueryClient } from '@tanstack/react-query';
import { useCallback, useEffect, useRef, useState } from 'react';
import { api, ApiError, setUnauthorizedHandler } from './api';
import { AgentPicker } from './agent-picker';
import { useConsoleConfig } from './console-config';
import { ConsoleNav } from './console-nav';
import { CurrentView } from './current-view';
import { FailingRunsWarning } from './failing-runs';
import { href, useRoute, type Landing } from './routes';
import { readAgent, readToken, saveAgent, saveToken } from './session';
import { SignIn } from './sign-in';
import { ViewBoundary } from './view-boundary';

type Auth = { state: 'checking' } | { state: 'signed-out'; error: string | null } | { state: 'signed-in' };

/**
 * Whether the API takes this tab's token (or none: a Keel without KEEL_API_TOKENS on loopback asks for none). Only a
 * 401 means no: a 403 is a token of one agent, and any other failure is the views' to show.
 */
async function probe(): Promise<Auth> {
  try {
    await api.GET('/v1/approvals', { params: { query: { limit: 1 } } });
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return { state: 'signed-out', error: err.message };
  }
  return { state: 'signed-in' };
}

/** The console: sign-in when the API asks for a token, then the header, the places and the view the URL names. */
export function App() {
  const [auth, setAuth] = useState<Auth>({ state: 'checking' });
  const signedIn = useRef(false);
  signedIn.current = auth.state === 'signed-in';
  const [agentId, setAgentId] = useState(readAgent);
  // Decided once, as the page opens: choosing an agent later does not move the person away from the view they see.
  const [landing] = useState<Landing>(() => (readAgent() ? 'approvals' : 'agents'));
  const route = useRoute(landing);
  const config = useConsoleConfig();
  const queryClient = useQueryClient();
  const heading = useRef<HTMLHeadingElement>(null);

  useEffect(() => {
    // A token refused mid-session (revoked, the server restarted with others): forget it and ask again.
    setUnauthorizedHandler((message) => {
      if (!signedIn.current) return;
      saveToken(null);
      // What this token read is not shown to the next one.
      queryClient.clear();
      setAuth({ state: 'signed-out', error: `Signed out: ${message}` });
    });
    const hadToken = readToken() !== null;
    void probe().then((a) => {
      if (a.state === 'signed-out') saveToken(null);
      // Without a token, being asked for one is no error; a stored token refused is worth saying.
      setAuth(a.state === 'signed-out' && !hadToken ? { state: 'signed-out', error: null } : a);
    });
  }, [queryClient]);

  // A new place takes the focus to its heading, so keyboard and screen reader users start there.
  const firstRoute = useRef(true);
  useEffect(() => {
    if (firstRoute.current) {
      firstRoute.current = false;
      return;
    }
    heading.current?.focus();
  }, [route]);

  const signIn = useCallback(async (token: string) => {
    saveToken(token || null);
    const a = await probe();
    if (a.state === 'signed-out') saveToken(null);
    // An operator's token also goes, as an HttpOnly cookie, to the codec server the Temporal UI decodes through.
    else void api.POST('/codec/session').catch(() => undefined);
    setAuth(a.state === 'signed-out' ? { ...a, error: `The API refused this token: ${a.error}` } : a);
  }, []);
  const signOut = () => {
    void api.DELETE('/codec/session').catch(() => undefined);
    saveToken(null);
    queryClient.clear();
    setAuth({ state: 'signed-out', error: null });
  };
  const chooseAgent = (next: string) => {
    saveAgent(next);
    setAgentId(next);
  };

  return (
    <div className="app">
      <header className="top">
        <h1 className="brand">Keel console</h1>
        {auth.state === 'signed-in' ? (
          <>
            <AgentPicker agentId={agentId} onChange={chooseAgent} />
            <button type="button" className="button" onClick={signOut}>
              Sign out
            </button>
          </>
        ) : null}
      </header>
      {auth.state === 'signed-in' ? (
        <div className="layout">
          <ConsoleNav route={route} />
          <main className="content">
            <FailingRunsWarning agentId={agentId} config={config} />
            <ViewBoundary resetKey={`${href(route)}\n${agentId}`}>
              <CurrentView
                route={route}
                agentId={agentId}
                config={config}
                headingRef={heading}
                onChooseAgent={chooseAgent}
              />
            </ViewBoundary>
          </main>
        </div>
      ) : (
        <main className="content narrow">
          {auth.state === 'checking' ? (
            <p className="muted">Connecting to Keel…</p>
          ) : (
            <SignIn error={auth.error} onSignIn={signIn} />
          )}
        </main>
      )}
    </div>
  );
}
