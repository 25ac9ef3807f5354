import { href, type Route } from './routes';

type Place = Exclude<Route, { view: 'conversation' | 'eval' | 'eval-case' }>;

const PLACES: { route: Place; label: string }[] = [
  { route: { view: 'agents' }, label: 'Agents' },
  { route: { view: 'approvals' }, label: 'Approvals' },
  { route: { view: 'conversations' }, label: 'Conversations' },
  { route: { view: 'delegates' }, label: 'Delegates' },
  { route: { view: 'evals' }, label: 'Evaluations' },
  { route: { view: 'jobs' }, label: 'Jobs and routines' },
  { route: { view: 'memory' }, label: 'Memory' },
  { route: { view: 'tools' }, label: 'Tools' },
  { route: { view: 'usage' }, label: 'Usage and budgets' },
  { route: { view: 'audit' }, label: 'Audit' },
];

/** The place a route is under: a conversation under Conversations, an evaluation and its cases under Evaluations. */
function placeOf(route: Route): Place['view'] {
  switch (route.view) {
    case 'conversation':
      return 'conversations';
    case 'eval':
    case 'eval-case':
      return 'evals';
    default:
      return route.view;
  }
}

/** The console's places; the one shown is marked as the current page. */
export function ConsoleNav({ route }: { route: Route }) {
  const shown = placeOf(route);
  return (
    <nav aria-label="Console" className="console-nav">
      <ul>
        {PLACES.map((p) => (
          <li key={p.route.view}>
            <a href={href(p.route)} aria-current={p.route.view === shown ? 'page' : undefined}>
              {p.label}
            </a>
          </li>
        ))}
      </ul>
    </nav>
  );
}
