import { useQuery } from '@tanstack/react-query';
import type { ReflectionState } from '../api-types';
import { answer, api } from '../api';
import { ErrorAlert } from '../error-alert';
import { href } from '../routes';
import { instant } from '../time';

const usd = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', maximumFractionDigits: 4 });

const phase = (r: ReflectionState) =>
  !r.live ? 'no reflection workflow running' : r.draining ? 'draining now' : 'waiting for the next drain';

/**
 * The entries of a list whose items the API's schema leaves open (`unknown[]`, api/routes/proposals.ts): each is read
 * field by field, and a field that is not there reads as nothing.
 */
type Entry = Readonly<Record<string, unknown>>;
const entries = (list: readonly unknown[]): Entry[] =>
  list.filter((e): e is Entry => typeof e === 'object' && e !== null);
const text = (e: Entry, field: string): string => {
  const v = e[field];
  return typeof v === 'string' || typeof v === 'number' ? String(v) : '';
};

const conversationOf = (agentId: string) => (id: string) => (
  <a href={href({ view: 'conversation', agentId, conversationId: id })}>{id}</a>
);

/** Reflection's own state: its queue, the last drain, the poison list and the gate's decisions. */
export function ReflectionStateView({ agentId }: { agentId: string }) {
  const conversation = conversationOf(agentId);
  const state = useQuery({
    queryKey: ['agents', agentId, 'reflection'],
    queryFn: ({ signal }) =>
      answer(api.GET('/v1/agents/{agentId}/reflection', { params: { path: { agentId } }, signal })),
  });
  const r = state.data;
  return (
    <section aria-labelledby="reflection-heading">
      <h3 id="reflection-heading">Reflection</h3>
      <ErrorAlert error={state.error} />
      {r ? (
        <>
          <p className="meta">
            <span>{phase(r)}</span>
            <span>{r.drains} drains</span>
            <span>{usd.format(r.spentTodayUsd)} spent today</span>
            {r.awaiting ? <span>proposal {r.awaiting} awaits approval</span> : null}
          </p>
          {r.lastDrain ? <p className="text">Last drain: {JSON.stringify(r.lastDrain)}</p> : null}
          <h4>Queue</h4>
          {r.queued.length ? (
            <ul className="compact">
              {entries(r.queued).map((q) => (
                <li key={text(q, 'conversationId')}>
                  {conversation(text(q, 'conversationId'))}: messages {text(q, 'fromSeq')}–{text(q, 'toSeq')},{' '}
                  {text(q, 'outcome')}
                  {q.failures ? `, ${text(q, 'failures')} failed admissions` : ''}
                </li>
              ))}
            </ul>
          ) : (
            <p className="notice">Nothing queued.</p>
          )}
          <h4>Poison list</h4>
          {r.poisoned.length ? (
            <ul className="compact">
              {entries(r.poisoned).map((p) => (
                <li key={`${text(p, 'conversationId')}:${text(p, 'at')}`}>
                  {conversation(text(p, 'conversationId'))}: {text(p, 'failures')} failures
                  {p.proposalId ? `, last proposal ${text(p, 'proposalId')}` : ''} · {instant(text(p, 'at'))}
                </li>
              ))}
            </ul>
          ) : (
            <p className="notice">No poisoned summaries.</p>
          )}
          <h4>Gate log</h4>
          {r.gateLog.length ? (
            <ul className="compact">
              {entries(r.gateLog).map((g) => (
                <li key={`${text(g, 'turnId')}:${text(g, 'at')}`}>
                  {conversation(text(g, 'conversationId'))}:{' '}
                  <strong>{g.evolve === true ? 'worth learning' : 'skipped'}</strong>
                  <span className="text"> — {text(g, 'reason')}</span> · {instant(text(g, 'at'))}
                </li>
              ))}
            </ul>
          ) : (
            <p className="notice">The gate has decided nothing (it is off unless KEEL_REFLECTION_GATE=on).</p>
          )}
        </>
      ) : null}
    </section>
  );
}
