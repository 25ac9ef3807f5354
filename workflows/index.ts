// Every workflow the worker registers. One file per workflow.
export { conversationWorkflow } from './conversation';
export { delegateWorkflow } from './delegate';
export { jobRunWorkflow } from './job-run';
export { routineRunWorkflow } from './routine-run';
export { reflectionWorkflow } from './reflection';
