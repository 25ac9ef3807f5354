import { useEffect, useMemo, useState } from 'react';

/**
 * The console's places, in the URL's fragment (#/agents/shop/conversations/c1): the server serves one index.html and
 * needs no fallback route, and a place can be bookmarked or shared. A place of one agent names the agent (its id is
 * no secret), so that a link opens the same page in another tab; the token never goes in an address.
 */
export type AgentPlace =
  | { view: 'approvals' }
  | { view: 'audit' }
  | { view: 'conversations' }
  | { view: 'conversation'; conversationId: string }
  | { view: 'delegates' }
  | { view: 'evals' }
  | { view: 'eval'; evalId: string }
  | { view: 'eval-case'; evalId: string; caseId: string }
  | { view: 'jobs' }
  | { view: 'memory' }
  | { view: 'tools' }
  | { view: 'usage' };

/**
 * A place of one agent, under #/agents/<agentId>/. `agentId` is '' in an address of before agents were in addresses
 * (#/conversations/c1): the tab's agent fills it, and with none chosen the view asks for one.
 */
export type AgentRoute = AgentPlace & { agentId: string };

/** Every place: the list of agents, the inbox of every agent's approvals (#/approvals), and an agent's places. */
export type Route = { view: 'agents' } | { view: 'inbox' } | AgentRoute;

/** Where the console opens when the URL names no place: the agents, or the inbox once an agent is chosen. */
export type Landing = 'agents' | 'inbox';

/** The places of an agent's that are one list each, by the word that names them in an address. */
const LISTS = [
  'approvals',
  'audit',
  'conversations',
  'delegates',
  'evals',
  'jobs',
  'memory',
  'tools',
  'usage',
] as const;
type List = (typeof LISTS)[number];
const isList = (s: string | undefined): s is List => LISTS.some((l) => l === s);

/** An agent's place from the address's segments after the agent (or, in an old address, after the '#/'). */
function agentPlace([first, id, sub, subId]: string[]): AgentPlace | null {
  if (first === 'conversations' && id) return { view: 'conversation', conversationId: id };
  if (first === 'evals' && id)
    return sub === 'cases' && subId ? { view: 'eval-case', evalId: id, caseId: subId } : { view: 'eval', evalId: id };
  return isList(first) ? { view: first } : null;
}

/** The place an address names; an old address's agent is '', for the tab's agent to fill. */
export function parseRoute(hash: string, landing: Landing): Route {
  const parts = hash
    .replace(/^#\/?/, '')
    .split('/')
    .map((s) => {
      try {
        return decodeURIComponent(s);
      } catch {
        return s;
      }
    });
  if (parts[0] === 'agents') {
    const [agentId, ...place] = parts.slice(1);
    // An agent alone opens on its conversations, as choosing it in the list of agents does.
    return agentId ? { ...(agentPlace(place) ?? { view: 'conversations' }), agentId } : { view: 'agents' };
  }
  // The inbox's address is the one it always had: it holds every agent's approvals.
  if (parts[0] === 'approvals') return { view: 'inbox' };
  const old = agentPlace(parts);
  return old ? { ...old, agentId: '' } : { view: landing };
}

/** The path of an agent's place, after its agent. */
function placePath(route: AgentRoute): string {
  // Each id encoded on its own: a case's id holds ':' and a conversation's may hold what a path would split on.
  switch (route.view) {
    case 'conversation':
      return `conversations/${encodeURIComponent(route.conversationId)}`;
    case 'eval':
      return `evals/${encodeURIComponent(route.evalId)}`;
    case 'eval-case':
      return `evals/${encodeURIComponent(route.evalId)}/cases/${encodeURIComponent(route.caseId)}`;
    default:
      return route.view;
  }
}

/** A route's address. An agent's place with no agent is its old address, which asks for the agent. */
export function href(route: Route): string {
  switch (route.view) {
    case 'agents':
      return '#/agents';
    case 'inbox':
      return '#/approvals';
    default:
      return route.agentId
        ? `#/agents/${encodeURIComponent(route.agentId)}/${placePath(route)}`
        : `#/${placePath(route)}`;
  }
}

/** The list a place is in: a conversation's is the conversations, an evaluation's and its cases' the evaluations. */
export function listOf(route: AgentRoute): AgentRoute {
  switch (route.view) {
    case 'conversation':
      return { view: 'conversations', agentId: route.agentId };
    case 'eval':
    case 'eval-case':
      return { view: 'evals', agentId: route.agentId };
    default:
      return route;
  }
}

/**
 * Goes to a place: a new entry of the history (Back returns), or, with `replace`, in the place of the current one
 * (an address said again in its new form). The route follows at once, in the same render as what the caller changes
 * with it: history.pushState and replaceState fire no hashchange, so the event is sent here.
 */
export function go(route: Route, how: 'push' | 'replace' = 'push'): void {
  const to = href(route);
  if (to === window.location.hash) return;
  const oldURL = window.location.href;
  if (how === 'push') window.history.pushState(null, '', to);
  else window.history.replaceState(window.history.state, '', to);
  window.dispatchEvent(new HashChangeEvent('hashchange', { oldURL, newURL: window.location.href }));
}

/** The route the URL names now, following the back and forward buttons, links and `go`. */
export function useRoute(landing: Landing): Route {
  const [hash, setHash] = useState(() => window.location.hash);
  useEffect(() => {
    const follow = () => setHash(window.location.hash);
    // Back and Forward between entries that `go` pushed fire popstate, and hashchange too when the fragments differ.
    window.addEventListener('hashchange', follow);
    window.addEventListener('popstate', follow);
    return () => {
      window.removeEventListener('hashchange', follow);
      window.removeEventListener('popstate', follow);
    };
  }, []);
  return useMemo(() => parseRoute(hash, landing), [hash, landing]);
}
