import { useQuery } from '@tanstack/react-query';
import type { ReactNode } from 'react';
import type { TranscriptMessage, TranscriptToolCall } from '../api-types';
import { conversationWorkflowId, temporalUiLink } from '../console-config';
import { ErrorAlert } from '../error-alert';
import { forkQuery } from '../fork-query';
import { href } from '../routes';
import { instant } from '../time';
import { groupTurns, type TurnGroup, type TurnState } from '../transcript';
import { transcriptQuery } from '../transcript-query';
import { turnNumbers } from '../turn-numbers';
import { useLiveTurns } from '../use-live-turns';
import type { ViewProps } from '../view-props';
import { ForkBanner } from './fork-banner';
import { ForkButton } from './fork-button';
import { ForkComposer } from './fork-composer';

const groupKey = (g: TurnGroup) => `${g.turnId ?? 'note'}:${g.messages[0]!.seq}`;

/**
 * One conversation: its state, its transcript turn by turn, and the turn running now with its reply as it is
 * written, live.
 */
export function ConversationDetail({
  agentId,
  conversationId,
  config,
  headingRef,
}: ViewProps & { conversationId: string }) {
  const transcript = useQuery(transcriptQuery(agentId, conversationId));
  // The banner's query, shared: a fork (and only a fork) gets a composer.
  const fork = useQuery(forkQuery(agentId, conversationId));
  // Followed once the transcript was first read, also when that read failed.
  const t = useLiveTurns({ agentId, conversationId }, !transcript.isPending, transcript.dataUpdatedAt);
  const state = transcript.data?.state;
  const loading = transcript.isLoading;
  const workflowId = conversationWorkflowId(agentId, conversationId);
  const uiLink = temporalUiLink(config, workflowId);
  const groups = groupTurns(transcript.data?.messages ?? []);
  // Running by its events, and the conversation busy: a finished turn replayed from the first event is never shown
  // as running between its start and its end.
  const isRunning = (g: TurnGroup) =>
    g.turnId !== null && t.turns.get(g.turnId)?.status === 'running' && state?.busy !== false;
  const done = groups.filter((g) => !isRunning(g));
  const running = groups.filter(isRunning);
  const numbers = turnNumbers(done);
  // A turn a note split shows twice: its fork button goes with its end.
  const lastOfTurn = new Map(done.map((g) => [g.turnId, g]));

  return (
    <section aria-labelledby="view-heading">
      <div className="view-head">
        <h2 id="view-heading" ref={headingRef} tabIndex={-1}>
          Conversation {conversationId}
        </h2>
        <a href={href({ view: 'conversations', agentId })}>Back to the list</a>
      </div>
      <p className="meta">
        <span>
          Agent <strong>{agentId}</strong>
        </span>
        <span>
          Workflow <code>{workflowId}</code>
        </span>
        {uiLink ? (
          <a href={uiLink} target="_blank" rel="noreferrer">
            Open in Temporal UI
          </a>
        ) : (
          <span>Temporal UI link: set KEEL_TEMPORAL_UI_URL</span>
        )}
      </p>
      {state ? (
        <p className="meta">
          <span>{state.busy ? 'a turn is running' : 'idle'}</span>
          <span>{state.queued} queued</span>
          <span>
            live delegates:{' '}
            {state.liveDelegates.length ? state.liveDelegates.map((d) => <code key={d}>{d} </code>) : 'none'}
          </span>
        </p>
      ) : null}
      <ForkBanner agentId={agentId} conversationId={conversationId} />
      <ErrorAlert error={transcript.error} />
      {t.streamProblem ? <p className="muted">{t.streamProblem}</p> : null}
      <section aria-label="Transcript" className="transcript">
        {loading ? <p className="muted">Loading…</p> : null}
        {!loading && done.length === 0 && !transcript.error ? <p className="notice">No finished turn yet.</p> : null}
        <ol className="turns">
          {done.map((g) => {
            const n = g.turnId && lastOfTurn.get(g.turnId) === g ? numbers.get(g.turnId) : undefined;
            return (
              <Turn
                key={groupKey(g)}
                group={g}
                state={g.turnId ? t.turns.get(g.turnId) : undefined}
                number={n}
                fork={
                  n === undefined ? undefined : (
                    <ForkButton agentId={agentId} conversationId={conversationId} atTurn={n} />
                  )
                }
              />
            );
          })}
        </ol>
      </section>
      {/* The turn running now, apart: it joins the transcript when it ends, with its reply as recorded. */}
      <section aria-labelledby="now-heading" className="now">
        <h3 id="now-heading">Turn in progress</h3>
        {running.length === 0 && !t.live ? <p className="muted">No turn is running.</p> : null}
        <ol className="turns">
          {running.map((g) => (
            <Turn key={groupKey(g)} group={g} state={g.turnId ? t.turns.get(g.turnId) : undefined} />
          ))}
        </ol>
        {/* The one live region of the page: the reply as it is written, read out politely. */}
        <div aria-live="polite" className="live">
          {t.live ? (
            <div className="msg assistant streaming">
              <p className="who">Reply, as it is written</p>
              <p className="text">{t.live.text}</p>
            </div>
          ) : null}
        </div>
      </section>
      {fork.data ? <ForkComposer agentId={agentId} conversationId={conversationId} /> : null}
    </section>
  );
}

function Turn(props: { group: TurnGroup; state: TurnState | undefined; number?: number; fork?: ReactNode }) {
  const { group, state, number } = props;
  const first = group.messages[0]!;
  const isTurn = group.turnId !== null && group.turnId !== 'delegation';
  return (
    <li className="turn">
      <p className="turn-head">
        {isTurn ? (
          <>
            Turn {number === undefined ? '' : `${number} `}
            <code>{group.turnId!.slice(0, 8)}</code> ·{' '}
          </>
        ) : null}
        <time dateTime={first.at}>{instant(first.at)}</time>
      </p>
      {group.messages.map((m) => (
        <Entry key={m.seq} m={m} />
      ))}
      {isTurn && (state?.status || state?.delivery) ? (
        <p className="turn-status">
          Status: <strong>{state.status ?? 'unknown'}</strong>
          {state.delivery ? (
            <>
              {' '}
              · Delivery: <code>{state.delivery}</code>
            </>
          ) : null}
        </p>
      ) : null}
      {props.fork}
    </li>
  );
}

/** A tool server's call: its policy, a person's decision and how long it took, in a few words. */
function serverFacts(s: NonNullable<TranscriptToolCall['server']>): string {
  const decided = s.decidedBy ? ` by ${s.decidedBy}${s.note ? ` (${s.note})` : ''}` : '';
  const took = s.durationMs === null ? '' : ` · ${s.durationMs} ms`;
  return `policy ${s.policy} · ${s.status}${decided}${took}`;
}

function ToolCallEntry({ c }: { c: TranscriptToolCall }) {
  return (
    <details className="tool">
      <summary>
        Tool call: <code>{c.name ?? '(its model step is on another page)'}</code>
        {c.isError ? ' (error)' : ''}
        {c.server ? <span className="meta"> · {serverFacts(c.server)}</span> : null}
      </summary>
      {c.arguments ? <pre className="code">{JSON.stringify(c.arguments, null, 2)}</pre> : null}
      <pre className="text">{c.result}</pre>
    </details>
  );
}

function Entry({ m }: { m: TranscriptMessage }) {
  switch (m.role) {
    case 'tool':
      if (!m.toolCalls)
        return (
          <details className="tool">
            <summary>Tool results</summary>
            <pre className="text">{m.text}</pre>
          </details>
        );
      return (
        <>
          {m.toolCalls.map((c) => (
            <ToolCallEntry key={c.toolUseId} c={c} />
          ))}
        </>
      );
    case 'assistant':
      // A model call that only called tools has no text of its own.
      if (!m.text) return null;
      return (
        <div className="msg assistant">
          <p className="who">Reply</p>
          <p className="text">{m.text}</p>
        </div>
      );
    case 'user':
      return (
        <div className="msg user">
          <p className="who">User</p>
          <p className="text">{m.text}</p>
        </div>
      );
    case 'system':
      return (
        <div className="msg system">
          <p className="who">Note</p>
          <p className="text">{m.text}</p>
        </div>
      );
  }
}
