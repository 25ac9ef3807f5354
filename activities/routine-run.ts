import * as routineRun from '../services/routine-run';
import type { StepInput } from '../services/step';

export function routineRunActivities(deps: routineRun.RoutineRunDeps) {
  // Each activity is its step in services/routine-run.ts, with this worker's dependencies.
  return {
    beginRoutineRun: (input: StepInput<typeof routineRun.beginRoutineRun>) => routineRun.beginRoutineRun(deps, input),
    findRoutineTool: (input: StepInput<typeof routineRun.findRoutineTool>) => routineRun.findRoutineTool(deps, input),
    draftRoutineTool: (input: StepInput<typeof routineRun.draftRoutineTool>) =>
      routineRun.draftRoutineTool(deps, input),
    saveRoutineTool: (input: StepInput<typeof routineRun.saveRoutineTool>) => routineRun.saveRoutineTool(deps, input),
    runRoutineTool: (input: StepInput<typeof routineRun.runRoutineTool>) => routineRun.runRoutineTool(deps, input),
    holdRoutineRun: (input: StepInput<typeof routineRun.holdRoutineRun>) => routineRun.holdRoutineRun(deps, input),
    recordRoutineDecision: (input: StepInput<typeof routineRun.recordRoutineDecision>) =>
      routineRun.recordRoutineDecision(deps, input),
    finishRoutineRun: (input: StepInput<typeof routineRun.finishRoutineRun>) =>
      routineRun.finishRoutineRun(deps, input),
  };
}
