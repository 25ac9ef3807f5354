import type { ContentBlock, ModelMessage } from '../domain/model';
import { scriptedPlan } from '../domain/scripted-model';

/**
 * The activities of the benchmark's comparison workflows. `modelWithTranscript` is the design most integrations use:
 * the whole transcript travels as the activity's input (and so into workflow history) on every model call. `noop`
 * does nothing: a chain of them is the floor any design on Temporal pays for the same number of steps.
 */
export const baselineActivities = {
  async modelWithTranscript(input: { messages: ModelMessage[]; callIndex: number }): Promise<ContentBlock[]> {
    const plan = scriptedPlan(input.messages, input.callIndex);
    return plan.kind === 'respond' ? plan.content : [{ type: 'text', text: 'error' }];
  },
  async deliver(_input: { text: string }): Promise<{ outcome: string }> {
    return { outcome: 'skipped:channel_none' };
  },
  async noop(): Promise<void> {},
};

export type BaselineActivities = typeof baselineActivities;
