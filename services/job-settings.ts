import type { KeelConfig } from '../domain/config';
import { JOBS } from '../domain/jobs';

/** The scheduling settings of a Keel deployment. */
export interface JobSettings {
  taskQueue: string;
  everyFloorMs: number;
  catchupWindowMs: number;
  /** Retry delays of a failed run (tests shorten them). */
  backoffMs: readonly number[];
}

export const DEFAULT_JOB_SETTINGS: Omit<JobSettings, 'taskQueue'> = {
  everyFloorMs: JOBS.defaultEveryFloorMs,
  catchupWindowMs: JOBS.defaultCatchupWindowMs,
  backoffMs: JOBS.backoffMs,
};

/** The scheduling settings from the environment (the task queue comes from the Temporal settings). */
export function jobSettings(config: KeelConfig): Omit<JobSettings, 'taskQueue'> {
  return {
    everyFloorMs: config.jobs.everyFloorMs,
    catchupWindowMs: config.jobs.catchupWindowMs,
    backoffMs: config.jobs.backoffMs ?? DEFAULT_JOB_SETTINGS.backoffMs,
  };
}
