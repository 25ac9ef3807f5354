import * as atOnce from '../services/job-run-at-once';
import { bindSteps } from '../services/step';

/** A job's run in one step (services/job-run-at-once.ts), with this worker's dependencies. */
export function jobRunAtOnceActivities(deps: atOnce.JobRunAtOnceDeps) {
  return bindSteps(deps, atOnce);
}
