import type { Transports } from '../adapters/delivery/transport';
import type { CallModelInput, ModelStep } from '../domain/model';
import {
  callConversationModel,
  callTurnModel,
  type BeforeModelCall,
  type ConversationModelDeps,
} from '../services/conversation-model-call';
import { modelCallFailure } from '../services/model-call';
import { noticingBudgetStop } from '../services/owner-notice';
import { currentStep } from '../services/step';

export interface ModelActivityDeps extends ConversationModelDeps {
  /** How the owner hears that a budget stopped a call (once per budget and period). */
  transports: Transports;
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
    /** The same for a turn in one workflow task, with the transcript writes before the call in the same step. */
    callTurnModel: async (
      input: CallModelInput & { before: BeforeModelCall },
    ): Promise<ModelStep | { ended: true }> => {
      const step = currentStep();
      const notice = { pool: deps.pool, transports: deps.transports, agentId: input.agentId, step };
      return noticingBudgetStop(notice, callTurnModel(deps, input, step)).catch((err: unknown) => {
        throw modelCallFailure(err);
      });
    },
  };
}
