import { EventStreamContentType, fetchEventSource } from '@microsoft/fetch-event-source';
import { defaultPathSerializer } from 'openapi-fetch';
import type { paths } from './api-schema.gen';
import { authHeaders, errorOf } from './api';

/** The route of the stream, as the API's document names it. */
const EVENTS = '/v1/agents/{agentId}/conversations/{conversationId}/events' satisfies keyof paths;

/** One event of GET …/conversations/:id/events (api/routes/events.ts): its name, and its JSON data. */
export interface ConversationEvent {
  type: string;
  data: Record<string, unknown>;
}

/** The server refused the stream for a reason retrying will not change (a 401, 403 or 404). */
class Refused extends Error {}

/**
 * Follows a conversation's live events until the returned function is called. fetch-event-source, not EventSource:
 * EventSource cannot send an Authorization header, and the token must not go in the URL. A dropped stream reconnects
 * with Last-Event-ID, so no kept event is missed (text deltas are live only). `status` hears null while the stream is
 * open, else why it is not.
 */
export function followConversation(
  conversation: { agentId: string; conversationId: string },
  on: { event: (e: ConversationEvent) => void; status: (problem: string | null) => void },
): () => void {
  const abort = new AbortController();
  fetchEventSource(defaultPathSerializer(EVENTS, conversation), {
    headers: authHeaders(),
    signal: abort.signal,
    // A background tab keeps following: closing and reopening would lose the reply streaming meanwhile.
    openWhenHidden: true,
    async onopen(res) {
      if (res.ok && res.headers.get('content-type')?.startsWith(EventStreamContentType)) return on.status(null);
      const error = await errorOf(res);
      if (res.status >= 400 && res.status < 500) throw new Refused(error.message);
      throw error;
    },
    onmessage(msg) {
      if (!msg.event) return;
      let data: unknown;
      try {
        data = JSON.parse(msg.data);
      } catch {
        return;
      }
      if (typeof data !== 'object' || data === null) return;
      on.event({ type: msg.event, data: data as Record<string, unknown> });
    },
    onclose() {
      // The server ends a stream it cannot keep (it restarts, or the client fell behind): resume from the last id.
      throw new Error('the live stream ended');
    },
    onerror(err) {
      if (err instanceof Refused) {
        on.status(`Live updates stopped: ${err.message}`);
        throw err;
      }
      on.status('Live updates interrupted; reconnecting…');
      return 2000;
    },
  }).catch(() => undefined);
  return () => abort.abort();
}
