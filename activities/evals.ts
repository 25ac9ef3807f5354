import type { EvalOutcome } from '../contracts/evals';
import { failEvaluation, finishEvaluation, scoreEvalCase } from '../services/evals';
import { runEvalTurn, type EvalTurnDeps, type EvalTurnInput } from '../services/eval-turn';
import { modelCallFailure } from '../services/model-call';
import { currentStep } from '../services/step';

export function evalActivities(deps: EvalTurnDeps) {
  return {
    /** One turn of a case under the candidate; the workflow hears only how it ended (the turn is in PostgreSQL). */
    runEvalTurn: async (input: EvalTurnInput): Promise<{ outcome: string }> => {
      try {
        const { outcome } = await runEvalTurn(deps, input, currentStep());
        return { outcome };
      } catch (err) {
        throw modelCallFailure(err);
      }
    },
    scoreEvalCase: (input: { evalId: string; caseId: string }) =>
      scoreEvalCase(deps, input, currentStep()).catch((err: unknown) => {
        throw modelCallFailure(err);
      }),
    finishEvaluation: (input: { evalId: string }): Promise<EvalOutcome> => finishEvaluation(deps.pool, input),
    failEvaluation: (input: { evalId: string; reason: string }) => failEvaluation(deps.pool, input),
  };
}
