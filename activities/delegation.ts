import * as delegation from '../services/delegation';
import { bindSteps } from '../services/step';

/** Each activity is its step in services/delegation.ts, with this worker's dependencies. */
export function delegationActivities(deps: delegation.DelegationDeps) {
  return bindSteps(deps, delegation);
}
