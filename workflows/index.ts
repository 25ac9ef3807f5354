// Every workflow the worker registers. One file per workflow.
import type { CONVERSATION_WORKFLOW, ConversationWorkflow } from '../contracts/conversation';
import type { DELETION_WORKFLOW, DeletionWorkflow } from '../contracts/deletion';
import type { EVAL_CASE_WORKFLOW, EVAL_WORKFLOW, EvalCaseWorkflow, EvalWorkflow } from '../contracts/evals';
import type { DELEGATE_WORKFLOW, DelegateWorkflow } from '../contracts/delegate';
import type { JOB_RUN_WORKFLOW, JobRunWorkflow } from '../contracts/job-run';
import type { REFLECTION_WORKFLOW, ReflectionWorkflow } from '../contracts/reflection';
import type { REPLAY_RUN_WORKFLOW, ReplayRunWorkflow } from '../contracts/replay-run';
import type { ROUTINE_RUN_WORKFLOW, RoutineRunWorkflow } from '../contracts/routine-run';
import { conversationWorkflow } from './conversation';
import { delegateWorkflow } from './delegate';
import { deletionWorkflow } from './deletion';
import { evalCaseWorkflow, evalWorkflow } from './evals';
import { jobRunWorkflow } from './job-run';
import { reflectionWorkflow } from './reflection';
import { replayRunWorkflow } from './replay-run';
import { routineRunWorkflow } from './routine-run';

export {
  conversationWorkflow,
  delegateWorkflow,
  deletionWorkflow,
  evalWorkflow,
  evalCaseWorkflow,
  jobRunWorkflow,
  routineRunWorkflow,
  reflectionWorkflow,
  replayRunWorkflow,
};

/**
 * Callers start workflows by their contracts' type names and signatures: a workflow registered under another name, or
 * with another signature, fails the type check here.
 */
export type ContractsKept = Keeps<
  {
    conversationWorkflow: typeof conversationWorkflow;
    delegateWorkflow: typeof delegateWorkflow;
    deletionWorkflow: typeof deletionWorkflow;
    evalWorkflow: typeof evalWorkflow;
    evalCaseWorkflow: typeof evalCaseWorkflow;
    jobRunWorkflow: typeof jobRunWorkflow;
    routineRunWorkflow: typeof routineRunWorkflow;
    reflectionWorkflow: typeof reflectionWorkflow;
    replayRunWorkflow: typeof replayRunWorkflow;
  },
  Record<typeof CONVERSATION_WORKFLOW, ConversationWorkflow> &
    Record<typeof DELEGATE_WORKFLOW, DelegateWorkflow> &
    Record<typeof DELETION_WORKFLOW, DeletionWorkflow> &
    Record<typeof EVAL_WORKFLOW, EvalWorkflow> &
    Record<typeof EVAL_CASE_WORKFLOW, EvalCaseWorkflow> &
    Record<typeof JOB_RUN_WORKFLOW, JobRunWorkflow> &
    Record<typeof ROUTINE_RUN_WORKFLOW, RoutineRunWorkflow> &
    Record<typeof REFLECTION_WORKFLOW, ReflectionWorkflow> &
    Record<typeof REPLAY_RUN_WORKFLOW, ReplayRunWorkflow>
>;
type Keeps<Registered extends Contracts, Contracts> = Registered;
