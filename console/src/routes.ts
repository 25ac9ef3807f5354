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
  return route.view === 'conversation'
    ? `#/conversations/${encodeURIComponent(route.conversationId)}`
    : `#/${route.view}`;
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
