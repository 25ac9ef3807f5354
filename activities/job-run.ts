import * as jobRun from '../services/job-run';
import { bindSteps } from '../services/step';

/** Each activity is its step in services/job-run.ts, with this worker's dependencies. */
export function jobRunActivities(deps: jobRun.JobRunDeps) {
  return bindSteps(deps, jobRun);
}
