import * as routineRun from '../services/routine-run';
import { bindSteps } from '../services/step';

/** Each activity is its step in services/routine-run.ts, with this worker's dependencies. */
export function routineRunActivities(deps: routineRun.RoutineRunDeps) {
  return bindSteps(deps, routineRun);
}
