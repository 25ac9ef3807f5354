import { useEffect, useState } from 'react';

/**
 * The console's places, in the URL's fragment (#/approvals, #/conversations/c1): the server serves one index.html
 * and needs no fallback route, and a place can be bookmarked or shared (it never holds the token).
 */
export type Route =
  | { view: 'agents' }
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

/** Where the console opens when the URL names no place: the agents, or the approvals once an agent is chosen. */
export type Landing = 'agents' | 'approvals';

export function parseRoute(hash: string, landing: Landing): Route {
  const [first, ...rest] = hash
    .replace(/^#\/?/, '')
    .split('/')
    .map((s) => {
      try {
        return decodeURIComponent(s);
      } catch {
        return s;
      }
    });
  switch (first) {
    case 'conversations':
      return rest[0] ? { view: 'conversation', conversationId: rest[0] } : { view: 'conversations' };
    case 'evals':
      if (!rest[0]) return { view: 'evals' };
      return rest[1] === 'cases' && rest[2]
        ? { view: 'eval-case', evalId: rest[0], caseId: rest[2] }
        : { view: 'eval', evalId: rest[0] };
    case 'agents':
    case 'approvals':
    case 'audit':
    case 'delegates':
    case 'jobs':
    case 'memory':
    case 'tools':
    case 'usage':
      return { view: first };
    default:
      return { view: landing };
  }
}

export function href(route: Route): string {
  // Each id encoded on its own: a case's id holds ':' and a conversation's may hold what a path would split on.
  switch (route.view) {
    case 'conversation':
      return `#/conversations/${encodeURIComponent(route.conversationId)}`;
    case 'eval':
      return `#/evals/${encodeURIComponent(route.evalId)}`;
    case 'eval-case':
      return `#/evals/${encodeURIComponent(route.evalId)}/cases/${encodeURIComponent(route.caseId)}`;
    default:
      return `#/${route.view}`;
  }
}

/** The route the URL names now, following the back and forward buttons and links. */
export function useRoute(landing: Landing): Route {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash, landing));
  useEffect(() => {
    const follow = () => setRoute(parseRoute(window.location.hash, landing));
    window.addEventListener('hashchange', follow);
    return () => window.removeEventListener('hashchange', follow);
  }, [landing]);
  return route;
}
