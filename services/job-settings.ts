import type { KeelConfig } from '../domain/config';
import { JOBS } from '../domain/jobs';

/** The scheduling settings of a Keel deployment. */
export interface JobSettings {
  taskQueue: string;
  everyFloorMs: number;
  catchupWindowMs: number;
  /** Retry delays of a failed run (tests shorten them). */
  backoffMs: readonly number[];
  /** How long a run waits for its turn before it books an error (JOBS.turnDeadlineMs). */
  turnDeadlineMs: number;
}

export const DEFAULT_JOB_SETTINGS: Omit<JobSettings, 'taskQueue'> = {
  everyFloorMs: JOBS.defaultEveryFloorMs,
  catchupWindowMs: JOBS.defaultCatchupWindowMs,
  backoffMs: JOBS.backoffMs,
  turnDeadlineMs: JOBS.turnDeadlineMs,
};

/** The scheduling settings from the environment (the task queue comes from the Temporal settings). */
export function jobSettings(config: KeelConfig): Omit<JobSettings, 'taskQueue'> {
  return {
    everyFloorMs: config.jobs.everyFloorMs,
    catchupWindowMs: config.jobs.catchupWindowMs,
    backoffMs: config.jobs.backoffMs ?? DEFAULT_JOB_SETTINGS.backoffMs,
    turnDeadlineMs: config.jobs.turnDeadlineMs,
  };
}
