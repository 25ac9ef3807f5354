import {
  acceptInbound,
  createRetriggerTurn,
  joinTurn,
  openTurns as queuedTurns,
  appendTranscript,
  finishTurn as commitTurnEnd,
  inboundTexts,
  markTurnRunning,
  markTurnStarted,
  type AcceptInput,
  type NewTranscriptEntry,
} from '../db/conversations';
import { Context, log } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { queueTurnForReflection } from './reflection';
import { publishEvent } from '../db/events';
import { admittedResults, hasDelegateWork, markRelay } from '../db/admissions';
import { isDataError } from '../db/errors';
import { inTransaction, type Pool } from '../db/pool';
import type { PoolClient } from 'pg';
import { retriggerText } from '../domain/delegation';
import type { QueuedMessage, ToolResults, TurnEnd, TurnNote } from '../domain/conversation';
import { FAILURE } from '../domain/failures';
import { transcriptOrigin } from '../domain/ids';

export interface AppendInput {
  conversationKey: string;
  turnId: string;
  toolResults?: ToolResults;
  note?: TurnNote;
  /** Messages steered into this turn: they are answered by it instead of by turns of their own. */
  steered?: QueuedMessage[];
}

export type ConversationTurnDeps = { pool: Pool };

/** Records an inbound message once per messageId (the idempotency of submission lives here). */
export async function acceptMessage(
  deps: ConversationTurnDeps,
  input: AcceptInput,
): Promise<{ turnId: string; duplicate: boolean }> {
  const { pool } = deps;
  try {
    return await acceptInbound(pool, input);
  } catch (err) {
    // PostgreSQL refused the data itself: retrying would hold the conversation forever.
    if (isDataError(err)) {
      const message = `the message cannot be stored: ${(err as Error).message}`;
      throw ApplicationFailure.nonRetryable(message, FAILURE.invalidInput);
    }
    throw err;
  }
}

/**
 * The conversation's workflow closes, idle: streams hear it (the next message starts a new run). Also where a test
 * holds the close, to send a message at that instant.
 */
export async function conversationIdle(
  deps: ConversationTurnDeps,
  input: { conversationKey: string; runId: string; idleMs: number },
): Promise<void> {
  const { pool } = deps;
  await publishEvent(pool, input.conversationKey, 'conversation.idle', [input.runId], {
    idleMs: input.idleMs,
  });
}

/** Turns PostgreSQL has queued or running for the conversation, oldest first. */
export async function openTurns(
  deps: ConversationTurnDeps,
  input: { conversationKey: string },
): Promise<QueuedMessage[]> {
  const { pool } = deps;
  return queuedTurns(pool, input.conversationKey);
}

/** What a fresh run takes up: the open turns, oldest first, and whether delegates' outcomes need admitting. */
export async function resumeConversation(
  deps: ConversationTurnDeps,
  input: { conversationKey: string },
): Promise<{ turns: QueuedMessage[]; delegateWork: boolean }> {
  const { pool } = deps;
  const [turns, delegateWork] = await Promise.all([
    queuedTurns(pool, input.conversationKey),
    hasDelegateWork(pool, input.conversationKey),
  ]);
  return { turns, delegateWork };
}

type TurnStart = { conversationKey: string; turnId: string; messageIds: string[] };

/** Puts the turn's message into the transcript and marks the turn running; returns the transcript's last seq. */
export async function startTurn(deps: ConversationTurnDeps, input: TurnStart): Promise<number> {
  return inTransaction(deps.pool, async (db) => {
    await markTurnRunning(db, input.turnId);
    return writeTurnStart(db, input);
  });
}

/**
 * startTurn for a turn whose message may have reached the workflow twice (the API records a message, then hands it
 * over; a retry hands it over again): null when the turn has ended already, and nothing is written. One statement:
 * the turn marked running, its messages read into its transcript and its start heard.
 */
export async function beginTurn(deps: ConversationTurnDeps, input: TurnStart): Promise<number | null> {
  return markTurnStarted(deps.pool, input.conversationKey, input.turnId, input.messageIds, turnStarted(input));
}

/** The turn's messages in its transcript, and its start heard; the turn was marked running in this transaction. */
async function writeTurnStart(db: PoolClient, input: TurnStart): Promise<number> {
  const seq = await appendTranscript(
    db,
    input.conversationKey,
    input.turnId,
    await userEntries(db, input.conversationKey, input.messageIds),
  );
  await publishEvent(db, input.conversationKey, 'turn.started', [input.turnId], turnStarted(input));
  return seq;
}

/** Appends tool results and steered messages between two model calls; returns the last seq. */
export async function appendToTranscript(deps: ConversationTurnDeps, input: AppendInput): Promise<number> {
  const { pool } = deps;
  return inTransaction(pool, async (db) => {
    const steered = input.steered ?? [];
    await joinTurn(db, input.conversationKey, input.turnId, steered);
    const entries = [
      ...(input.toolResults ? [toolEntry(input.turnId, input.toolResults)] : []),
      ...(input.note ? [noteEntry(input.turnId, input.note)] : []),
      ...(await userEntries(
        db,
        input.conversationKey,
        steered.map((m) => m.messageId),
      )),
    ];
    if (input.toolResults) {
      const { callIndex, results } = input.toolResults;
      await publishEvent(db, input.conversationKey, 'tool.called', [input.turnId, callIndex], {
        turnId: input.turnId,
        callIndex,
        results: results.map((r) => ({ toolUseId: r.tool_use_id, isError: r.is_error ?? false })),
      });
    }
    return appendTranscript(db, input.conversationKey, input.turnId, entries);
  });
}

/** Opens a retrigger turn: its synthetic message lists the admitted results (text from their durable rows). */
export async function startRetrigger(
  deps: ConversationTurnDeps,
  input: {
    conversationKey: string;
    turnId: string;
    delegateIds: string[];
  },
): Promise<number> {
  const { pool } = deps;
  return inTransaction(pool, async (db) => {
    await createRetriggerTurn(db, input.conversationKey, input.turnId);
    const text = retriggerText(await admittedResults(db, input.delegateIds));
    return appendTranscript(db, input.conversationKey, input.turnId, [
      { role: 'system', content: [{ type: 'text', text }], text, origin: transcriptOrigin.retrigger(input.turnId) },
    ]);
  });
}

/**
 * Commits how the turn ended (with its last tool results) before anyone is told; a retrigger also records its
 * relay.
 */
export async function finishTurn(
  deps: ConversationTurnDeps,
  input: {
    conversationKey: string;
    turnId: string;
    end: TurnEnd;
    modelCalls: number;
    toolResults?: ToolResults;
    relayOf?: string[];
  },
): Promise<void> {
  const { pool } = deps;
  const entries = input.toolResults ? [toolEntry(input.turnId, input.toolResults)] : [];
  // A failed turn leaves a note, so that the transcript (and the model, next turn) says what happened.
  if ('error' in input.end)
    entries.push(
      noteEntry(
        input.turnId,
        {
          callIndex: input.modelCalls,
          text: `turn ${input.end.status}: ${input.end.error.code}: ${input.end.error.message}`,
        },
        'end',
      ),
    );
  // The end, its entries and turn.finished: one statement.
  const ended = await commitTurnEnd(pool, input.conversationKey, input.turnId, input.end, input.modelCalls, entries);
  // The activity's logger adds the workflow id and run id to the line.
  log.info('turn finished', { turnId: input.turnId, status: input.end.status, modelCalls: input.modelCalls });
  // Committed first: reflection reads the turn from PostgreSQL by reference.
  const { conversationKey, turnId, end } = input;
  await queueTurnForReflection(pool, () => Context.current(), conversationKey, turnId, end, ended);
  if (input.relayOf?.length) {
    const relayed = input.end.status === 'replied' && !/^(error|dropped):/.test(input.end.delivery);
    await markRelay(pool, input.relayOf, relayed ? 'relayed' : 'relay_failed');
  }
}

/** A turn's messages as its transcript keeps them, in the order of their ids (db markTurnStarted makes the same). */
async function userEntries(
  db: Parameters<typeof inboundTexts>[0],
  conversationKey: string,
  messageIds: readonly string[],
): Promise<NewTranscriptEntry[]> {
  if (messageIds.length === 0) return [];
  const inbound = await inboundTexts(db, conversationKey, messageIds);
  return inbound.map((m) => ({
    role: 'user' as const,
    content: [{ type: 'text' as const, text: m.text }],
    text: m.text,
    origin: transcriptOrigin.userMessage(m.messageId),
  }));
}

/** What turn.started says. */
function turnStarted(input: TurnStart): Record<string, unknown> {
  return { turnId: input.turnId, messageIds: input.messageIds };
}

function noteEntry(turnId: string, note: TurnNote, what = `call-${note.callIndex}`): NewTranscriptEntry {
  return {
    role: 'system',
    content: [{ type: 'text', text: note.text }],
    text: note.text,
    origin: transcriptOrigin.note(turnId, what),
  };
}

function toolEntry(turnId: string, t: ToolResults): NewTranscriptEntry {
  return {
    role: 'tool',
    content: t.results,
    text: t.results.map((r) => (r.is_error ? `error: ${r.content}` : r.content)).join('\n'),
    origin: transcriptOrigin.toolResults(turnId, t.callIndex),
  };
}
