import * as delegation from '../services/delegation';
import type { StepInput } from '../services/step';

export function delegationActivities(deps: delegation.DelegationDeps) {
  // Each activity is its step in services/delegation.ts, with this worker's dependencies.
  return {
    claimDelegate: (input: StepInput<typeof delegation.claimDelegate>) => delegation.claimDelegate(deps, input),
    prepareDelegate: (input: StepInput<typeof delegation.prepareDelegate>) => delegation.prepareDelegate(deps, input),
    markBudgetBlocked: (input: StepInput<typeof delegation.markBudgetBlocked>) =>
      delegation.markBudgetBlocked(deps, input),
    readSkill: (input: StepInput<typeof delegation.readSkill>) => delegation.readSkill(deps, input),
    updateTask: (input: StepInput<typeof delegation.updateTask>) => delegation.updateTask(deps, input),
    commentOnTask: (input: StepInput<typeof delegation.commentOnTask>) => delegation.commentOnTask(deps, input),
    commitDelegateOutcome: (input: StepInput<typeof delegation.commitDelegateOutcome>) =>
      delegation.commitDelegateOutcome(deps, input),
    admitDelegateOutcomes: (input: StepInput<typeof delegation.admitDelegateOutcomes>) =>
      delegation.admitDelegateOutcomes(deps, input),
    noteBackgroundResults: (input: StepInput<typeof delegation.noteBackgroundResults>) =>
      delegation.noteBackgroundResults(deps, input),
  };
}
