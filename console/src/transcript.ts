import type { TranscriptMessage } from './api-types';

/** A turn as the transcript shows it: its messages (user, tool calls, reply), in order. */
export interface TurnGroup {
  turnId: string | null;
  messages: TranscriptMessage[];
}

/** How a turn went, as its live events said: its status and where its reply went. */
export interface TurnState {
  status?: string;
  delivery?: string;
}

/** Consecutive messages of one turn together; notes outside any turn stand alone. */
export function groupTurns(messages: readonly TranscriptMessage[]): TurnGroup[] {
  const groups: TurnGroup[] = [];
  for (const m of messages) {
    const last = groups[groups.length - 1];
    if (last && m.turnId !== null && last.turnId === m.turnId) last.messages.push(m);
    else groups.push({ turnId: m.turnId, messages: [m] });
  }
  return groups;
}

/** What a turn's events tell, folded into what is known of its turns. */
export function foldTurnEvent(
  turns: ReadonlyMap<string, TurnState>,
  type: string,
  data: Record<string, unknown>,
): ReadonlyMap<string, TurnState> {
  const turnId = typeof data.turnId === 'string' ? data.turnId : undefined;
  if (!turnId) return turns;
  const was = turns.get(turnId) ?? {};
  let now: TurnState | undefined;
  if (type === 'turn.started') now = { ...was, status: was.status ?? 'running' };
  if (type === 'turn.finished' && typeof data.status === 'string') now = { ...was, status: data.status };
  if (type === 'reply.delivered' && typeof data.outcome === 'string') now = { ...was, delivery: data.outcome };
  if (!now) return turns;
  return new Map(turns).set(turnId, now);
}
