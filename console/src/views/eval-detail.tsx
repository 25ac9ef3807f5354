import { useQuery } from '@tanstack/react-query';
import type { EvalCase, EvalCaseResult, Evaluation } from '../api-types';
import { DivergenceView } from '../divergence';
import { ErrorAlert } from '../error-alert';
import { evalCounts, evalError } from '../eval-summary';
import { evalQuery } from '../evals-query';
import { href } from '../routes';
import { TableWrap } from '../table-wrap';
import { duration, instant } from '../time';
import { usd } from '../usd';
import type { ViewProps } from '../view-props';

/** An evaluation: what it ran under, and its suite's table, a case a row, followed until the evaluation ends. */
export function EvalDetail({ agentId, evalId, headingRef }: ViewProps & { evalId: string }) {
  const evaluation = useQuery(evalQuery(agentId, evalId));
  const e = evaluation.data;

  return (
    <section aria-labelledby="view-heading">
      <div className="view-head">
        <h2 id="view-heading" ref={headingRef} tabIndex={-1}>
          Evaluation <span title={evalId}>{evalId.slice(0, 8)}</span>
        </h2>
        <a href={href({ view: 'evals', agentId })}>Back to the evaluations</a>
      </div>
      <ErrorAlert error={evaluation.error} />
      {evaluation.isLoading ? <p className="muted">Loading…</p> : null}
      {e ? (
        <>
          <EvalFacts evaluation={e} />
          {e.cases.length === 0 ? <p className="notice">This evaluation has no case.</p> : null}
          {e.cases.length ? (
            <TableWrap label="Cases table" keepFirstColumn>
              <table className="cases">
                <thead>
                  <tr>
                    <th scope="col">Case</th>
                    <th scope="col">Source</th>
                    <th scope="col">Verdict</th>
                    <th scope="col">Reasons</th>
                    <th scope="col">Cost</th>
                    <th scope="col">Latency</th>
                    <th scope="col">Model calls</th>
                    <th scope="col">Changed turns</th>
                    <th scope="col">Tool-call diff</th>
                    <th scope="col">First divergence</th>
                  </tr>
                </thead>
                <tbody>
                  {e.cases.map((c) => (
                    <CaseRow key={c.caseId} agentId={agentId} evalId={evalId} c={c} />
                  ))}
                </tbody>
              </table>
            </TableWrap>
          ) : null}
        </>
      ) : null}
    </section>
  );
}

function EvalFacts({ evaluation: e }: { evaluation: Evaluation }) {
  const counts = evalCounts(e);
  const error = evalError(e);
  const overlay = Object.keys(e.candidate).length > 0;
  return (
    <>
      <p className="meta">
        <span>
          Status <strong>{e.status}</strong>
        </span>
        <span>Mode {e.mode}</span>
        <span>Suite {e.suite ?? '—'}</span>
        <span>
          By <code>{e.actor}</code>
        </span>
        <span>
          Created <time dateTime={e.createdAt}>{instant(e.createdAt)}</time>
        </span>
        {e.finishedAt ? (
          <span>
            Finished <time dateTime={e.finishedAt}>{instant(e.finishedAt)}</time>
          </span>
        ) : null}
      </p>
      {counts ? (
        <p>
          {counts.cases} case{counts.cases === 1 ? '' : 's'}: {counts.passed} passed, {counts.failed} failed ·{' '}
          {usd(counts.costUsd)} · {counts.modelCalls} model call{counts.modelCalls === 1 ? '' : 's'}
        </p>
      ) : null}
      {error ? <p className="text">The evaluation failed: {error}</p> : null}
      {overlay ? (
        <details>
          <summary>Candidate</summary>
          <pre className="code">{JSON.stringify(e.candidate, null, 2)}</pre>
        </details>
      ) : (
        <p className="muted">Candidate: the agent as it is (no overlay).</p>
      )}
    </>
  );
}

/** Tool calls the candidate made that the recording did not (+), and the other way round (-), by turn. */
function toolCallDiff(r: EvalCaseResult): string[] {
  return r.toolCallDiff.map(
    (d) => `turn ${d.turn}: ${[...d.added.map((a) => `+ ${a}`), ...d.removed.map((x) => `- ${x}`)].join(', ')}`,
  );
}

function CaseRow({ agentId, evalId, c }: { agentId: string; evalId: string; c: EvalCase }) {
  const r = c.result;
  return (
    <tr>
      <th scope="row">
        <a href={href({ view: 'eval-case', agentId, evalId, caseId: c.caseId })}>{c.caseId}</a>
      </th>
      <td>{c.source}</td>
      <td className={`verdict ${c.status}`}>{c.status}</td>
      {/* A text column is given room when it holds text, and no more than its dash or "none" when not. */}
      <td className={r?.reasons.length ? 'text' : undefined}>{r?.reasons.length ? r.reasons.join('\n') : '—'}</td>
      <td className="num">{r ? usd(r.costUsd) : '—'}</td>
      <td className="num">{r ? duration(r.latencyMs) : '—'}</td>
      <td className="num">{r ? r.modelCalls : '—'}</td>
      <td>{r?.changedTurns.length ? r.changedTurns.join(', ') : r ? 'none' : '—'}</td>
      <td className={r?.toolCallDiff.length ? 'text' : undefined}>
        {r?.toolCallDiff.length ? toolCallDiff(r).join('\n') : r ? 'none' : '—'}
      </td>
      <td className="divergence-cell">
        {r?.firstDivergence ? <DivergenceView divergence={r.firstDivergence} /> : r ? 'none' : '—'}
      </td>
    </tr>
  );
}
