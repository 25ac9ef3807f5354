/** What the API tells workflows that wait for an agent's budgets: a delegate's or a job run's stopped model call. */
import { defineSignal } from '@temporalio/workflow';

/** The agent's budgets changed: a delegate or job run waiting for one calls the model again (docs/spend.md). */
export const budgetsChanged = defineSignal('budgetsChanged');
