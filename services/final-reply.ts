import type { Transports } from '../adapters/delivery/transport';
import type { Pool } from '../db/pool';
import { repliedEnd, type FinalReplyInput } from '../domain/conversation';
import type { DeliveryReport } from '../domain/delivery';
import { replyResult } from '../domain/transcript';
import { finishTurn } from './conversation-turn';
import { deliverReply } from './delivery';
import type { Step } from './step';

/**
 * A reply that ends its turn, sent once, then the turn's end committed: a turn's last two steps in one, so one
 * hand-over between the SDK and the workflow fewer. A retry sends nothing again (the ledger), and commits the end once.
 */
export async function deliverFinalReply(
  pool: Pool,
  transports: Transports,
  input: FinalReplyInput,
  step: Pick<Step, 'signal' | 'heartbeat'>,
): Promise<DeliveryReport> {
  const { modelCalls, relayOf, toolResults, replyToolUseId, ...reply } = input;
  const report = await deliverReply(pool, transports, reply, step);
  const { conversationKey, turnId } = reply;
  const end = repliedEnd(reply.replySeq, report.outcome);
  const results =
    toolResults && replyToolUseId
      ? {
          toolResults: {
            ...toolResults,
            results: [...toolResults.results, replyResult(replyToolUseId, report.outcome)],
          },
        }
      : {};
  await finishTurn({ pool }, { conversationKey, turnId, end, modelCalls, ...results, ...(relayOf ? { relayOf } : {}) });
  return report;
}
