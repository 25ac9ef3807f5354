import { randomUUID } from 'node:crypto';
import { recordAudit } from '../db/audit';
import { keptTurns } from '../db/eval-recordings';
import { createFork, forkOf, setForkTools, type ForkRow } from '../db/forks';
import { inTransaction, type Pool } from '../db/pool';
import type { Candidate } from '../domain/evals';
import { conversationWorkflowId, forkConversationId } from '../domain/ids';
import { containsNul, scrub } from '../domain/text';
import { CaseError } from './eval-cases';
import { candidateKnown } from './evals';

/** A fork as the API shows it. */
export function forkView(agentId: string, f: ForkRow) {
  const prefix = conversationWorkflowId(agentId, '');
  return {
    conversationId: f.conversationKey.slice(prefix.length),
    forkedFrom: f.sourceKey.slice(prefix.length),
    atTurn: f.atTurn,
    candidate: f.candidate,
    enabledTools: f.enabledTools,
  };
}

/**
 * A new sandbox conversation holding turns 1 to `atTurn` of a real one, to go on under the candidate. The original is
 * only read. Answers undefined when the conversation is unknown.
 */
export async function forkConversation(
  pool: Pool,
  asked: { agentId: string; conversationId: string; atTurn: number; candidate: Candidate; actor: string },
) {
  if (containsNul(asked.candidate)) throw new CaseError('a candidate must not contain the NUL character (U+0000)', 400);
  const f = { ...asked, candidate: scrub(asked.candidate) };
  await candidateKnown(pool, f.agentId, f.candidate);
  const sourceKey = conversationWorkflowId(f.agentId, f.conversationId);
  const kept = await keptTurns(pool, sourceKey);
  if (kept.length === 0) return undefined;
  if (f.atTurn > kept.length)
    throw new CaseError(
      `conversation ${f.conversationId} has ${kept.length} finished turns; it cannot fork at ${f.atTurn}`,
      400,
    );
  const conversationId = forkConversationId(randomUUID());
  const key = conversationWorkflowId(f.agentId, conversationId);
  const row = await inTransaction(pool, async (db) => {
    const made = await createFork(
      db,
      { agentId: f.agentId, conversationId, key, sourceKey, atTurn: f.atTurn, candidate: f.candidate },
      kept.slice(0, f.atTurn),
    );
    await recordAudit(db, {
      agentId: f.agentId,
      actor: f.actor,
      action: 'conversation.fork',
      subject: conversationId,
      detail: { from: f.conversationId, atTurn: f.atTurn },
    });
    return made;
  });
  return forkView(f.agentId, row);
}

/** Which of a fork's tools may have real effects; undefined when the conversation is not a fork. */
export async function enableForkTools(
  pool: Pool,
  asked: { agentId: string; conversationId: string; tools: string[]; actor: string },
) {
  if (containsNul(asked.tools)) throw new CaseError('a tool name must not contain the NUL character (U+0000)', 400);
  const f = { ...asked, tools: scrub(asked.tools) };
  const key = conversationWorkflowId(f.agentId, f.conversationId);
  const row = await inTransaction(pool, async (db) => {
    const set = await setForkTools(db, key, f.tools);
    if (set)
      await recordAudit(db, {
        agentId: f.agentId,
        actor: f.actor,
        action: 'fork.effects',
        subject: f.conversationId,
        detail: { tools: f.tools },
      });
    return set;
  });
  return row && forkView(f.agentId, row);
}

export async function forkDetails(pool: Pool, agentId: string, conversationId: string) {
  const row = await forkOf(pool, conversationWorkflowId(agentId, conversationId));
  return row && forkView(agentId, row);
}
