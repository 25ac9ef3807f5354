import type { Transports } from '../adapters/delivery/transport';
import type { CallModelInput, ModelStep } from '../domain/model';
import { callConversationModel, type ConversationModelDeps } from '../services/conversation-model-call';
import { modelCallFailure } from '../services/model-call';
import { noticingBudgetStop } from '../services/owner-notice';
import { currentStep } from '../services/step';
import type { ToolCallDeps } from '../services/tool-calls';
import { callTurnModelAndEffects, type TurnModelStep, type TurnModelStepInput } from '../services/turn-model-step';

export interface ModelActivityDeps extends ConversationModelDeps {
  /** How the owner hears that a budget stopped a call (once per budget and period). */
  transports: Transports;
  /** Tool servers' calls, which a turn's model step may make itself. */
  tools: ToolCallDeps;
}

export function modelActivities(deps: ModelActivityDeps) {
  return {
    /** Calls the model once for a turn or a delegate and appends its answer to the transcript. */
    callModel: async (input: CallModelInput): Promise<ModelStep> => {
      const step = currentStep();
      const notice = { pool: deps.pool, transports: deps.transports, agentId: input.agentId, step };
      return noticingBudgetStop(notice, callConversationModel(deps, input, step)).catch((err: unknown) => {
        throw modelCallFailure(err);
      });
    },
    /**
     * The same for a turn in one workflow task, with the transcript writes before the call in the same step, and what
     * its answer leads to that needs no person (services/turn-model-step.ts).
     */
    callTurnModel: async (input: TurnModelStepInput): Promise<TurnModelStep> => {
      const step = currentStep();
      const notice = { pool: deps.pool, transports: deps.transports, agentId: input.agentId, step };
      const effects = { model: deps, tools: deps.tools, transports: deps.transports };
      const work = callTurnModelAndEffects(effects, input, step);
      return noticingBudgetStop(notice, work).catch((err: unknown) => {
        throw modelCallFailure(err);
      });
    },
  };
}
