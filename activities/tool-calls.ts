import type {
  OpenToolCallApprovalInput,
  PrepareToolCallInput,
  RunToolCallInput,
  SettleToolCallInput,
} from '../contracts/tool-calls';
import { currentStep } from '../services/step';
import {
  openToolCallApproval,
  prepareAndRunToolCall,
  prepareToolCall,
  runToolCall,
  settleToolCallWait,
  type ToolCallDeps,
} from '../services/tool-calls';

/** A tool server's tool called from a turn or a delegate: prepare, open and settle a wait for a person, run once. */
export function toolCallActivities(deps: ToolCallDeps) {
  return {
    prepareToolCall: (input: PrepareToolCallInput) => prepareToolCall(deps, input),
    prepareAndRunToolCall: (input: PrepareToolCallInput) => prepareAndRunToolCall(deps, input, currentStep()),
    openToolCallApproval: (input: OpenToolCallApprovalInput) => openToolCallApproval(deps, input),
    settleToolCallWait: (input: SettleToolCallInput) => settleToolCallWait(deps, input),
    runToolCall: (input: RunToolCallInput) => runToolCall(deps, input, currentStep()),
  };
}
