import { answer, api } from './api';
import type { Deletion } from './api-types';

/** How often a deletion's progress is asked, and for how long before the console stops waiting for it. */
const POLL_MS = 500;
const PATIENCE_MS = 120_000;

/**
 * A deletion the API started (202), followed until it is no longer running: a workflow does the work, so the answer
 * to DELETE only says it began. Throws when it failed, or is still running after PATIENCE_MS.
 */
export async function awaitDeletion(started: Deletion): Promise<Deletion> {
  const { agentId, deletionId } = started;
  const deadline = Date.now() + PATIENCE_MS;
  let deletion = started;
  while (deletion.status === 'running') {
    if (Date.now() > deadline)
      throw new Error(`Deletion ${deletionId} is still running; refresh later to see whether it finished.`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    deletion = await answer(
      api.GET('/v1/agents/{agentId}/deletions/{deletionId}', { params: { path: { agentId, deletionId } } }),
    );
  }
  if (deletion.status === 'failed')
    throw new Error(`Deletion ${deletionId} failed; the audit trail says what it had done.`);
  return deletion;
}
