/** The eval command's report: a case regresses when it fails now and its baseline did not record it failing. */
import type { CaseResult, EvalSummary } from '../domain/evals';

export interface Evaluation {
  id: string;
  mode: string;
  status: 'running' | 'finished' | 'failed';
  summary: EvalSummary | { error: string } | null;
  cases: { caseId: string; source: string; status: 'pending' | 'passed' | 'failed'; result: CaseResult | null }[];
}

/** The verdicts a suite keeps as its baseline (`--update-baseline` writes it). */
export interface Baseline {
  evalId?: string;
  cases: Record<string, 'pending' | 'passed' | 'failed'>;
}

/** Cases that fail now and passed in the baseline, or are new; without a baseline, every failing case. */
export function regressionsOf(e: Evaluation, baseline: Baseline | undefined): string[] {
  return e.cases.filter((c) => c.status !== 'passed' && baseline?.cases[c.caseId] !== 'failed').map((c) => c.caseId);
}

const usd = (n: number) => `$${n.toFixed(6)}`;
const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

export function evalReport(r: {
  evaluation: Evaluation;
  suite: string;
  agent: string;
  candidate: unknown;
  baseline: Baseline | undefined;
  regressions: string[];
}): { json: unknown; markdown: string } {
  const e = r.evaluation;
  const summary = e.summary && 'cases' in e.summary ? e.summary : undefined;
  const json = {
    evalId: e.id,
    suite: r.suite,
    agent: r.agent,
    mode: e.mode,
    status: e.status,
    candidate: r.candidate,
    summary: e.summary,
    regressions: r.regressions,
    cases: e.cases.map((c) => ({
      caseId: c.caseId,
      source: c.source,
      status: c.status,
      baseline: r.baseline?.cases[c.caseId] ?? null,
      ...c.result,
    })),
  };
  const lines = [
    `# Evaluation of ${r.agent}: suite ${r.suite}`,
    '',
    summary
      ? `${summary.passed} of ${summary.cases} cases passed, ${r.regressions.length} regressed. Mode ${e.mode}; ` +
        `${summary.modelCalls} model calls, ${usd(summary.costUsd)}.`
      : `The evaluation ${e.status}: ${e.summary && 'error' in e.summary ? e.summary.error : 'no summary'}.`,
    '',
    '```json',
    JSON.stringify(r.candidate, null, 2),
    '```',
    '',
    '| Case | Verdict | Baseline | Cost | Latency (ms) | Reasons |',
    '| --- | --- | --- | --- | --- | --- |',
    ...e.cases.map((c) => {
      const res = c.result;
      const regressed = r.regressions.includes(c.caseId) ? ' (regressed)' : '';
      return (
        `| ${cell(c.caseId)} | ${c.status}${regressed} | ${r.baseline?.cases[c.caseId] ?? '—'} | ` +
        `${res ? usd(res.costUsd) : '—'} | ${res?.latencyMs ?? '—'} | ${cell(res?.reasons.join('; ') ?? '')} |`
      );
    }),
  ];
  for (const c of e.cases) {
    const res = c.result;
    if (!res || (!res.firstDivergence && res.toolCallDiff.length === 0)) continue;
    lines.push('', `## ${c.caseId}`);
    if (res.firstDivergence) {
      const d = res.firstDivergence;
      lines.push('', `First divergent request: turn ${d.turn}, model call ${d.callIndex}, ${d.part}.`, '', '```diff');
      lines.push(d.diff, '```');
    }
    for (const t of res.toolCallDiff)
      lines.push(
        '',
        `Turn ${t.turn} tool calls: ${[...t.added.map((a) => `+ ${a}`), ...t.removed.map((x) => `- ${x}`)].join(', ')}`,
      );
  }
  return { json, markdown: lines.join('\n') + '\n' };
}
