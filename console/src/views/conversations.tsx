import { useInfiniteQuery } from '@tanstack/react-query';
import { useEffect, useId, useState } from 'react';
import { answer, api } from '../api';
import { AgentNeeded } from '../agent-needed';
import { ErrorAlert } from '../error-alert';
import { LoadMore } from '../load-more';
import { pagedQuery } from '../paged-query';
import { href } from '../routes';
import { instant, relative } from '../time';
import type { ViewProps } from '../view-props';
import { ViewHead } from '../view-head';

/** Typing pauses this long before the list is asked again. */
const SEARCH_DELAY_MS = 300;

/** An agent's conversations, most recent activity first, searched by id. */
export function ConversationsView({ agentId, headingRef }: ViewProps) {
  const searchId = useId();
  const [typed, setTyped] = useState('');
  const [q, setQ] = useState('');
  useEffect(() => {
    const timer = setTimeout(() => setQ(typed.trim()), SEARCH_DELAY_MS);
    return () => clearTimeout(timer);
  }, [typed]);
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
          <form role="search" className="field inline" onSubmit={(e) => e.preventDefault()}>
            <label htmlFor={searchId}>Search conversations</label>
            <input
              id={searchId}
              type="search"
              value={typed}
              onChange={(e) => setTyped(e.target.value)}
              placeholder="conversation id contains…"
              autoComplete="off"
              spellCheck={false}
            />
          </form>
          <ErrorAlert error={list.error} />
          {items.length === 0 && list.isSuccess ? (
            <p className="notice">{q ? `No conversation id contains “${q}”.` : 'No conversations yet.'}</p>
          ) : null}
          <ul className="rows">
            {items.map((c) => (
              <li key={c.conversationId} className="row">
                <a className="row-title" href={href({ view: 'conversation', conversationId: c.conversationId })}>
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
