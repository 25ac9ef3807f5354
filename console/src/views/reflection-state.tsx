import type { ReflectionState } from '../api-types';
import { apiPath, get } from '../api';
import { ErrorAlert } from '../error-alert';
import { href } from '../routes';
import { instant } from '../time';
import { useLoad } from '../use-load';

const usd = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', maximumFractionDigits: 4 });

const phase = (r: ReflectionState) =>
  !r.live ? 'no reflection workflow running' : r.draining ? 'draining now' : 'waiting for the next drain';

/** Reflection's own state: its queue, the last drain, the poison list and the gate's decisions. */
export function ReflectionStateView({ agentId, round }: { agentId: string; round: number }) {
  const state = useLoad(
    agentId,
    (signal) => get<ReflectionState>(apiPath('agents', agentId, 'reflection'), signal),
    round,
  );
  const r = state.data;
  const conversation = (id: string) => <a href={href({ view: 'conversation', conversationId: id })}>{id}</a>;
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
              {r.queued.map((q) => (
                <li key={q.conversationId}>
                  {conversation(q.conversationId)}: messages {q.fromSeq}–{q.toSeq}, {q.outcome}
                  {q.failures ? `, ${q.failures} failed admissions` : ''}
                </li>
              ))}
            </ul>
          ) : (
            <p className="notice">Nothing queued.</p>
          )}
          <h4>Poison list</h4>
          {r.poisoned.length ? (
            <ul className="compact">
              {r.poisoned.map((p) => (
                <li key={`${p.conversationId}:${p.at}`}>
                  {conversation(p.conversationId)}: {p.failures} failures
                  {p.proposalId ? `, last proposal ${p.proposalId}` : ''} · {instant(p.at)}
                </li>
              ))}
            </ul>
          ) : (
            <p className="notice">No poisoned summaries.</p>
          )}
          <h4>Gate log</h4>
          {r.gateLog.length ? (
            <ul className="compact">
              {r.gateLog.map((g) => (
                <li key={`${g.turnId}:${g.at}`}>
                  {conversation(g.conversationId)}: <strong>{g.evolve ? 'worth learning' : 'skipped'}</strong>
                  <span className="text"> — {g.reason}</span> · {instant(g.at)}
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
