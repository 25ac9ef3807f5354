import { href } from './routes';

/** What a per-agent view says before an agent is chosen. */
export function AgentNeeded({ what }: { what: string }) {
  return (
    <p className="notice">
      Choose an agent in Agent above, or from the <a href={href({ view: 'agents' })}>list of agents</a>, to see its{' '}
      {what}.
    </p>
  );
}
