import { useInfiniteQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { answer, api } from '../api';
import { AgentNeeded } from '../agent-needed';
import { ErrorAlert } from '../error-alert';
import { LoadMore } from '../load-more';
import { pagedQuery } from '../paged-query';
import { href } from '../routes';
import { SearchBox } from '../search-box';
import { instant, relative } from '../time';
import { useDebounced } from '../use-debounced';
import type { ViewProps } from '../view-props';
import { ViewHead } from '../view-head';
import { ConversationDeletion } from './conversation-deletion';

/** An agent's conversations, most recent activity first, searched by id; each can be deleted. */
export function ConversationsView({ agentId, headingRef }: ViewProps) {
  const [typed, setTyped] = useState('');
  const q = useDebounced(typed.trim());
  const [deleting, setDeleting] = useState<string | null>(null);
  const list = useInfiniteQuery({
    ...pagedQuery(['agents', agentId, 'conversations', { q }], (cursor, signal) =>
      answer(
        api.GET('/v1/agents/{agentId}/conversations', {
          params: { path: { agentId }, query: { q, limit: 50, cursor } },
          signal,
        }),
      ),
    ),
    enabled: agentId !== '',
  });
  const items = list.data ?? [];

  return (
    <section aria-labelledby="view-heading">
      <ViewHead
        title="Conversations"
        headingRef={headingRef}
        {...(agentId ? { onRefresh: () => void list.refetch() } : {})}
        loading={list.isFetching}
      />
      {!agentId ? (
        <AgentNeeded what="conversations" />
      ) : (
        <>
          <SearchBox
            label="Search conversations"
            placeholder="conversation id contains…"
            value={typed}
            onChange={setTyped}
          />
          <ErrorAlert error={list.error} />
          <ConversationDeletion agentId={agentId} conversationId={deleting} onClose={() => setDeleting(null)} />
          {items.length === 0 && list.isSuccess ? (
            <p className="notice">{q ? `No conversation id contains “${q}”.` : 'No conversations yet.'}</p>
          ) : null}
          <ul className="rows">
            {items.map((c) => (
              <li key={c.conversationId} className="row">
                <a
                  className="row-title"
                  href={href({ view: 'conversation', agentId, conversationId: c.conversationId })}
                >
                  {c.conversationId}
                </a>
                <span className="meta">
                  <span>
                    last activity{' '}
                    <time dateTime={c.lastActivityAt} title={instant(c.lastActivityAt)}>
                      {relative(c.lastActivityAt)}
                    </time>
                  </span>
                  <span>
                    {c.turns} turn{c.turns === 1 ? '' : 's'}
                  </span>
                  <span>
                    {c.lastTurn
                      ? `last outcome ${c.lastTurn.status}` +
                        (c.lastTurn.deliveryOutcome ? `, delivery ${c.lastTurn.deliveryOutcome}` : '')
                      : 'no turn yet'}
                  </span>
                </span>
                {c.lastTurn ? (
                  <span className="preview text">
                    {c.lastTurn.messageText}
                    {c.lastTurn.replyText ? ` → ${c.lastTurn.replyText}` : ''}
                  </span>
                ) : null}
                <div className="actions">
                  <button
                    type="button"
                    className="button danger"
                    aria-label={`Delete conversation ${c.conversationId}`}
                    onClick={() => setDeleting(c.conversationId)}
                  >
                    Delete
                  </button>
                </div>
              </li>
            ))}
          </ul>
          {list.isLoading ? <p className="muted">Loading…</p> : null}
          <LoadMore list={list} />
        </>
      )}
    </section>
  );
}
