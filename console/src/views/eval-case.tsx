import { useQuery } from '@tanstack/react-query';
import type { CandidateTurn, EvalToolCall, EvalTurn, RecordedTurn } from '../api-types';
import { DivergenceView } from '../divergence';
import { ErrorAlert } from '../error-alert';
import { evalCaseQuery } from '../evals-query';
import { href } from '../routes';
import { duration } from '../time';
import { usd } from '../usd';
import type { ViewProps } from '../view-props';
import { EvalRows } from './eval-rows';

/** How each of the candidate's tool calls was answered: none of them reached a real tool. */
const ANSWERED: Record<EvalToolCall['answeredBy'], string> = {
  recording: 'from the recording',
  'dry-run': 'dry run',
  denied: 'denied by policy',
  'needs-approval': 'needs approval (not run)',
  channel: 'by the channel',
};

/**
 * One case side by side, turn by turn: on the left what was recorded, on the right what the candidate did, with how
 * each of its tool calls was answered. Turns whose outcome, reply or tool calls changed are marked.
 */
export function EvalCaseView({ agentId, evalId, caseId, headingRef }: ViewProps & { evalId: string; caseId: string }) {
  const found = useQuery(evalCaseQuery(agentId, evalId, caseId));
  const c = found.data;
  const changed = new Set(c?.result?.changedTurns ?? []);

  return (
    <section aria-labelledby="view-heading">
      <div className="view-head">
        <h2 id="view-heading" ref={headingRef} tabIndex={-1}>
          Case {caseId}
        </h2>
        <a href={href({ view: 'eval', agentId, evalId })}>Back to the evaluation</a>
      </div>
      <ErrorAlert error={found.error} />
      {found.isLoading ? <p className="muted">Loading…</p> : null}
      {c ? (
        <>
          <p className="meta">
            <span>
              Verdict <strong className={`verdict ${c.status}`}>{c.status}</strong>
            </span>
            <span>Source {c.source}</span>
            {c.result ? (
              <>
                <span>{usd(c.result.costUsd)}</span>
                <span>{duration(c.result.latencyMs)}</span>
                <span>changed turns: {c.result.changedTurns.length ? c.result.changedTurns.join(', ') : 'none'}</span>
              </>
            ) : null}
          </p>
          {c.result?.reasons.length ? (
            <ul className="compact" aria-label="Reasons">
              {c.result.reasons.map((r, i) => (
                <li key={i} className="text">
                  {r}
                </li>
              ))}
            </ul>
          ) : null}
          <ol className="turns">
            {c.turns.map((t) => (
              <TurnSides key={t.turn} t={t} changed={changed.has(t.turn)} />
            ))}
          </ol>
        </>
      ) : null}
    </section>
  );
}

function TurnSides({ t, changed }: { t: EvalTurn; changed: boolean }) {
  const headingId = `case-turn-${t.turn}`;
  return (
    <li className={changed ? 'turn changed' : 'turn'} aria-labelledby={headingId}>
      <h3 id={headingId} className="turn-title">
        Turn {t.turn}
        {/* Said in words, not only by the highlight. */}
        {changed ? <span className="badge">changed</span> : null}
      </h3>
      <div className="sides">
        <section aria-label={`Recorded, turn ${t.turn}`} className="side">
          <h4>Recorded</h4>
          {t.recorded ? <RecordedSide turn={t.recorded} /> : <p className="notice">Not recorded: a written case.</p>}
        </section>
        <section aria-label={`Candidate, turn ${t.turn}`} className="side">
          <h4>Candidate</h4>
          {t.candidate ? <CandidateSide turn={t.candidate} /> : <p className="notice">Not run yet.</p>}
        </section>
      </div>
    </li>
  );
}

/** A side's outcome and reply, as facts under its rows. */
function Ending({ outcome, reply }: { outcome: string; reply: string | null }) {
  return (
    <dl className="facts">
      <div>
        <dt>Outcome</dt>
        <dd>
          <strong>{outcome}</strong>
        </dd>
      </div>
      <div>
        <dt>Reply</dt>
        <dd className="text">{reply ?? <span className="muted">none</span>}</dd>
      </div>
    </dl>
  );
}

function RecordedSide({ turn }: { turn: RecordedTurn }) {
  return (
    <>
      <EvalRows rows={turn.rows} />
      <Ending outcome={turn.outcome} reply={turn.reply} />
    </>
  );
}

function CandidateSide({ turn }: { turn: CandidateTurn }) {
  return (
    <>
      <EvalRows rows={turn.rows} />
      <Ending outcome={turn.outcome} reply={turn.reply} />
      {turn.toolCalls.length ? (
        <>
          <h5>Tool calls</h5>
          <ul className="compact">
            {turn.toolCalls.map((call, i) => (
              <li key={i}>
                <code>
                  {call.name} {JSON.stringify(call.arguments)}
                </code>{' '}
                · answered {ANSWERED[call.answeredBy] ?? call.answeredBy}
                {call.isError ? ' (error)' : ''}
              </li>
            ))}
          </ul>
        </>
      ) : (
        <p className="muted">No tool call.</p>
      )}
      <p className="meta">
        <span>{usd(turn.costUsd)}</span>
        <span>{duration(turn.latencyMs)}</span>
        <span>
          {turn.modelCalls} model call{turn.modelCalls === 1 ? '' : 's'}
        </span>
        {turn.guard.map((g, i) => (
          <span key={i}>
            guard {g.verdict}
            {g.rule ? ` (${g.rule})` : ''}
          </span>
        ))}
      </p>
      {turn.divergence ? <DivergenceView divergence={turn.divergence} /> : null}
    </>
  );
}
