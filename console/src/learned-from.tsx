import { href } from './routes';

/** The conversations of the agent's a memory change was learned from, each a link to its transcript. */
export function LearnedFrom({ agentId, conversationIds }: { agentId: string; conversationIds: readonly string[] }) {
  if (conversationIds.length === 0) return null;
  return (
    <p className="learned">
      Learned from{' '}
      {conversationIds.map((c, i) => (
        <span key={c}>
          {i > 0 ? ', ' : ''}
          <a href={href({ view: 'conversation', agentId, conversationId: c })}>{c}</a>
        </span>
      ))}
    </p>
  );
}
