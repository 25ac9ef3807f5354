// The workflows of Keel with one deliberately non-deterministic edit: the conversation sleeps before it starts,
// a command its recorded histories do not have. Replaying them against this code must fail.
import { sleep } from '@temporalio/workflow';
import { conversationWorkflow as recorded } from '../../workflows/conversation';

export * from '../../workflows';

export async function conversationWorkflow(...args: Parameters<typeof recorded>): ReturnType<typeof recorded> {
  await sleep(1);
  return recorded(...args);
}
