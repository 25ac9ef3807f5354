import type { JobRun } from '../api-types';
import { temporalUiLink, useConsoleConfig } from '../console-config';
import { duration, instant } from '../time';

/**
 * When a run (a job's or a routine's) started and finished and how long it took, and its workflow in the Temporal UI
 * when the server knows the UI.
 */
export function RunTimes({
  run,
  workflowId,
}: {
  run: Pick<JobRun, 'firedAt' | 'startedAt' | 'finishedAt' | 'durationMs'>;
  workflowId: string;
}) {
  const link = temporalUiLink(useConsoleConfig(), workflowId);
  return (
    <>
      {/* A run can start after it fired (it waited for the one before): then both are worth saying. */}
      {run.firedAt !== run.startedAt ? (
        <>
          {' '}
          · fired <time dateTime={run.firedAt}>{instant(run.firedAt)}</time>
        </>
      ) : null}{' '}
      · started <time dateTime={run.startedAt}>{instant(run.startedAt)}</time>
      {run.finishedAt ? (
        <>
          {' '}
          · finished <time dateTime={run.finishedAt}>{instant(run.finishedAt)}</time>
        </>
      ) : null}{' '}
      · {run.durationMs === null ? 'running' : `took ${duration(run.durationMs)}`}
      {link ? (
        <>
          {' '}
          ·{' '}
          <a href={link} target="_blank" rel="noreferrer">
            Open in Temporal UI
          </a>
        </>
      ) : null}
    </>
  );
}
