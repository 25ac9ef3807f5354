import { queryOptions } from '@tanstack/react-query';
import { answer, api } from './api';
import type { ConversationView, TranscriptMessage } from './api-types';

/** The transcript is read in pages of this many messages (the route's largest). */
const PAGE = 1000;

/** A conversation's transcript as far as it was read: its messages in order, and its state at the last read. */
export interface Transcript {
  messages: TranscriptMessage[];
  state: ConversationView['state'];
}

/**
 * A conversation's transcript, for useQuery. A read asks only for the messages after the last one already held, page
 * by page, and adds them: the conversation's live events make it read again often (use-live-turns.ts), and a long
 * conversation is not read whole each time.
 */
export function transcriptQuery(agentId: string, conversationId: string) {
  return queryOptions({
    queryKey: ['agents', agentId, 'conversations', conversationId, 'transcript'],
    queryFn: async ({ client, queryKey, signal }): Promise<Transcript> => {
      let messages = client.getQueryData<Transcript>(queryKey)?.messages ?? [];
      for (;;) {
        const afterSeq = messages.reduce((last, m) => Math.max(last, m.seq), 0);
        const view = await answer(
          api.GET('/v1/agents/{agentId}/conversations/{conversationId}', {
            params: { path: { agentId, conversationId }, query: { afterSeq, limit: PAGE } },
            signal,
          }),
        );
        const fresh = view.messages.filter((m) => m.seq > afterSeq);
        if (fresh.length) messages = [...messages, ...fresh];
        if (view.messages.length < PAGE) return { messages, state: view.state };
      }
    },
  });
}
