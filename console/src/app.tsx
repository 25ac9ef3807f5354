import { useQueryClient } from '@tanstack/react-query';
import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { api, ApiError, setUnauthorizedHandler } from './api';
import { AgentPicker } from './agent-picker';
import { useConsoleConfig } from './console-config';
import { ConsoleNav } from './console-nav';
import { CurrentView } from './current-view';
import { FailingRunsWarning } from './failing-runs';
import { go, href, listOf, useRoute, type Landing, type Route } from './routes';
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
  // The agent this tab looks at (sessionStorage), for the places of every agent and the old addresses.
  const [tabAgent, setTabAgent] = useState(readAgent);
  // Decided once, as the page opens: choosing an agent later does not move the person away from the view they see.
  const [landing] = useState<Landing>(() => (readAgent() ? 'inbox' : 'agents'));
  const addressed = useRoute(landing);
  // An old address names no agent: the tab's is the place's, and the address is said again with it (below).
  const named = !('agentId' in addressed) || addressed.agentId !== '';
  const route = useMemo<Route>(
    () => ('agentId' in addressed && !addressed.agentId ? { ...addressed, agentId: tabAgent } : addressed),
    [addressed, tabAgent],
  );
  const agentId = 'agentId' in route ? route.agentId : tabAgent;
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

  // The agent an address names becomes the tab's: Agent shows it, and the places of every agent keep it.
  useEffect(() => {
    if (agentId === tabAgent) return;
    saveAgent(agentId);
    setTabAgent(agentId);
  }, [agentId, tabAgent]);

  // An old address, or one said otherwise (an agent alone, an id not encoded), becomes the place's address, in place.
  useEffect(() => {
    if ('agentId' in route && route.agentId) go(route, 'replace');
  }, [route]);

  // A new place takes the focus to its heading, so keyboard and screen reader users start there. The same place of
  // another agent (an address said again, an agent chosen in Agent) leaves the focus where it is.
  const place = href('agentId' in route ? { ...route, agentId: '' } : route);
  const firstRoute = useRef(true);
  useEffect(() => {
    if (firstRoute.current) {
      firstRoute.current = false;
      return;
    }
    heading.current?.focus();
  }, [place]);

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
    setTabAgent(next);
    // The address follows: an old one takes the agent as it is; another agent's conversation or evaluation is not
    // this one's, so its list opens. The places of every agent stay.
    if ('agentId' in route) go({ ...(named ? listOf(route) : route), agentId: next });
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
          <ConsoleNav route={route} agentId={agentId} />
          <main className="content">
            <FailingRunsWarning agentId={agentId} config={config} />
            <ViewBoundary resetKey={`${href(route)}\n${agentId}`}>
              <CurrentView route={route} agentId={agentId} config={config} headingRef={heading} />
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
