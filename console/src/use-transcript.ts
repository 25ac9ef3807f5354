import { useCallback, useEffect, useRef, useState } from 'react';
import type { ConversationView, TranscriptMessage } from './api-types';
import { get, messageOf, withQuery } from './api';
import { followConversation, type ConversationEvent } from './conversation-events';
import { foldTurnEvent, type TurnState } from './transcript';

/** The transcript is read in pages of this many messages (the route's largest). */
const PAGE = 1000;

export interface Transcript {
  messages: TranscriptMessage[];
  state: ConversationView['state'] | undefined;
  /** Each turn's status and delivery, from its events. */
  turns: ReadonlyMap<string, TurnState>;
  /** The reply being written now, as its text deltas arrive. */
  live: { turnId: string; text: string } | null;
  loading: boolean;
  error: string | null;
  /** Why live updates are not flowing, while they are not. */
  streamProblem: string | null;
}

/**
 * A conversation's transcript, kept up to date while it is open: read once, then its live events (from the first
 * one, which gives every turn's status and delivery) say when to read the new messages, and text deltas show the
 * reply being written.
 */
export function useTranscript(path: string): Transcript {
  const [messages, setMessages] = useState<TranscriptMessage[]>([]);
  const [state, setState] = useState<ConversationView['state']>();
  const [turns, setTurns] = useState<ReadonlyMap<string, TurnState>>(new Map());
  const [live, setLive] = useState<{ turnId: string; text: string } | null>(null);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<string | null>(null);
  const [streamProblem, setStreamProblem] = useState<string | null>(null);
  // What belongs to the conversation open now: answers for one opened before are dropped.
  const openPath = useRef(path);
  const lastSeq = useRef(0);
  const finished = useRef(new Set<string>());
  const reading = useRef<{ of: string; read: Promise<void> } | null>(null);
  const readAgain = useRef(false);

  /** Reads the messages after the last one shown, page by page. */
  const readNew = useCallback(async (of: string) => {
    for (;;) {
      const view = await get<ConversationView>(withQuery(of, { afterSeq: lastSeq.current, limit: PAGE }));
      if (openPath.current !== of) return;
      const fresh = view.messages.filter((m) => m.seq > lastSeq.current);
      lastSeq.current = Math.max(lastSeq.current, ...fresh.map((m) => m.seq));
      if (fresh.length) setMessages((shown) => [...shown, ...fresh]);
      setState(view.state);
      if (view.messages.length < PAGE) return;
    }
  }, []);

  /** One read at a time; events during a read ask for one more after it. */
  const refresh = useCallback(
    (of: string) => {
      if (reading.current?.of === of) {
        readAgain.current = true;
        return;
      }
      const read = (async () => {
        do {
          readAgain.current = false;
          await readNew(of);
        } while (readAgain.current && openPath.current === of);
      })()
        .then(
          () => {
            // The reply is in the transcript now: the streamed copy goes.
            if (openPath.current === of) setLive((l) => (l && finished.current.has(l.turnId) ? null : l));
          },
          (err: unknown) => {
            if (openPath.current === of) setError(messageOf(err));
          },
        )
        .finally(() => {
          if (reading.current?.read === read) reading.current = null;
        });
      reading.current = { of, read };
    },
    [readNew],
  );

  useEffect(() => {
    openPath.current = path;
    lastSeq.current = 0;
    finished.current = new Set();
    readAgain.current = false;
    setMessages([]);
    setState(undefined);
    setTurns(new Map());
    setLive(null);
    setError(null);
    setStreamProblem(null);
    setLoading(true);
    const onEvent = ({ type, data }: ConversationEvent) => {
      if (openPath.current !== path) return;
      const turnId = typeof data.turnId === 'string' ? data.turnId : '';
      if (type === 'text.delta' && typeof data.delta === 'string') {
        const delta = data.delta;
        setLive((l) => (l && l.turnId === turnId ? { turnId, text: l.text + delta } : { turnId, text: delta }));
        return;
      }
      setTurns((t) => foldTurnEvent(t, type, data));
      if (type === 'turn.finished') finished.current.add(turnId);
      if (type !== 'reply.delivered') refresh(path);
    };
    let stop = () => undefined as void;
    let closed = false;
    readNew(path)
      .then(
        () => openPath.current === path && setLoading(false),
        (err: unknown) => {
          if (openPath.current !== path) return;
          setError(messageOf(err));
          setLoading(false);
        },
      )
      .finally(() => {
        if (!closed) stop = followConversation(`${path}/events`, { event: onEvent, status: setStreamProblem });
      });
    return () => {
      closed = true;
      stop();
    };
  }, [path, readNew, refresh]);

  return { messages, state, turns, live, loading, error, streamProblem };
}
