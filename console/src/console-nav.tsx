import { href, type AgentPlace, type Route } from './routes';

/** The places the console lists: the list of agents, the inbox, and the chosen agent's lists. */
type Place = 'agents' | 'inbox' | Exclude<AgentPlace['view'], 'approvals' | 'conversation' | 'eval' | 'eval-case'>;

const PLACES: { place: Place; label: string }[] = [
  { place: 'agents', label: 'Agents' },
  { place: 'inbox', label: 'Approvals' },
  { place: 'conversations', label: 'Conversations' },
  { place: 'delegates', label: 'Delegates' },
  { place: 'evals', label: 'Evaluations' },
  { place: 'jobs', label: 'Jobs and routines' },
  { place: 'memory', label: 'Memory' },
  { place: 'tools', label: 'Tools' },
  { place: 'usage', label: 'Usage and budgets' },
  { place: 'audit', label: 'Audit' },
];

/**
 * The place a route is under: a conversation under Conversations, an evaluation and its cases under Evaluations, an
 * agent's approvals under Approvals.
 */
function placeOf(route: Route): Place {
  switch (route.view) {
    case 'conversation':
      return 'conversations';
    case 'eval':
    case 'eval-case':
      return 'evals';
    case 'approvals':
      return 'inbox';
    default:
      return route.view;
  }
}

/** A place's route; an agent's lists are the chosen agent's (with none chosen, they ask for one). */
const routeOf = (place: Place, agentId: string): Route =>
  place === 'agents' || place === 'inbox' ? { view: place } : { view: place, agentId };

/** The console's places; the one shown is marked as the current page. */
export function ConsoleNav({ route, agentId }: { route: Route; agentId: string }) {
  const shown = placeOf(route);
  return (
    <nav aria-label="Console" className="console-nav">
      <ul>
        {PLACES.map((p) => (
          <li key={p.place}>
            <a href={href(routeOf(p.place, agentId))} aria-current={p.place === shown ? 'page' : undefined}>
              {p.label}
            </a>
          </li>
        ))}
      </ul>
    </nav>
  );
}
