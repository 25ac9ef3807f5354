import { useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef, useState } from 'react';
import { followConversation, type ConversationEvent } from './conversation-events';
import { foldTurnEvent, type TurnState } from './transcript';
import { transcriptQuery } from './transcript-query';

export interface LiveTurns {
  /** Each turn's status and delivery, from its events. */
  turns: ReadonlyMap<string, TurnState>;
  /** The reply being written now, as its text deltas arrive. */
  live: { turnId: string; text: string } | null;
  /** Why live updates are not flowing, while they are not. */
  streamProblem: string | null;
}

/**
 * A conversation's live events, followed once its transcript was first read (`follow`): from the first event, which
 * gives every turn's status and delivery. A turn's events make the transcript (transcriptQuery) read its new
 * messages; text deltas show the reply being written, until a read of the transcript after its turn ended
 * (`transcriptReadAt` moves) holds it.
 */
export function useLiveTurns(
  { agentId, conversationId }: { agentId: string; conversationId: string },
  follow: boolean,
  transcriptReadAt: number,
): LiveTurns {
  const queryClient = useQueryClient();
  const [turns, setTurns] = useState<ReadonlyMap<string, TurnState>>(new Map());
  const [live, setLive] = useState<{ turnId: string; text: string } | null>(null);
  const [streamProblem, setStreamProblem] = useState<string | null>(null);
  const finished = useRef(new Set<string>());

  useEffect(() => {
    if (!follow) return;
    // A read in flight when an event comes is dropped for a new one, which sees what the event announced. Events that
    // come together (the first ones, all at once) so make one read: those dropped at once never reach the network.
    const { queryKey } = transcriptQuery(agentId, conversationId);
    const readNew = () => void queryClient.invalidateQueries({ queryKey, exact: true });
    const onEvent = ({ type, data }: ConversationEvent) => {
      const turnId = typeof data.turnId === 'string' ? data.turnId : '';
      if (type === 'text.delta' && typeof data.delta === 'string') {
        const delta = data.delta;
        setLive((l) => (l && l.turnId === turnId ? { turnId, text: l.text + delta } : { turnId, text: delta }));
        return;
      }
      setTurns((t) => foldTurnEvent(t, type, data));
      if (type === 'turn.finished') finished.current.add(turnId);
      if (type !== 'reply.delivered') readNew();
    };
    return followConversation({ agentId, conversationId }, { event: onEvent, status: setStreamProblem });
  }, [follow, agentId, conversationId, queryClient]);

  // The reply is in the transcript now: the streamed copy goes.
  useEffect(() => setLive((l) => (l && finished.current.has(l.turnId) ? null : l)), [transcriptReadAt]);

  return { turns, live, streamProblem };
}
