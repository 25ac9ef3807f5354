// The workflows of Keel with one deliberately non-deterministic edit: a conversation, a delegate and a routine run
// each start a timer as they start, a command their recorded histories do not have (not awaited, so that their
// handlers are still registered in the first task, as an update-with-start needs). Replaying those histories against
// this code must fail; the versioning test deploys it as a new build beside them (test/cluster/versioning.test.ts).
import { sleep } from '@temporalio/workflow';
import { conversationWorkflow as recordedConversation } from '../../workflows/conversation';
import { delegateWorkflow as recordedDelegate } from '../../workflows/delegate';
import { routineRunWorkflow as recordedRoutineRun } from '../../workflows/routine-run';

export * from '../../workflows';

export async function conversationWorkflow(
  ...args: Parameters<typeof recordedConversation>
): ReturnType<typeof recordedConversation> {
  void sleep(1);
  return recordedConversation(...args);
}

export async function delegateWorkflow(
  ...args: Parameters<typeof recordedDelegate>
): ReturnType<typeof recordedDelegate> {
  void sleep(1);
  return recordedDelegate(...args);
}

export async function routineRunWorkflow(
  ...args: Parameters<typeof recordedRoutineRun>
): ReturnType<typeof recordedRoutineRun> {
  void sleep(1);
  return recordedRoutineRun(...args);
}
