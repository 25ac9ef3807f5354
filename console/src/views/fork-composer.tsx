import { useQueryClient } from '@tanstack/react-query';
import { useId, useState } from 'react';
import { answer, api } from '../api';
import { ErrorAlert } from '../error-alert';
import { transcriptQuery } from '../transcript-query';
import { useChange } from '../use-change';

/**
 * Goes on talking to a fork: a message posted as any user's would be, with no delivery (a fork's replies go nowhere,
 * its transcript is where they are read). Shown only on a fork: an operator never writes into a real conversation.
 */
export function ForkComposer({ agentId, conversationId }: { agentId: string; conversationId: string }) {
  const ids = { heading: useId(), message: useId() };
  const [text, setText] = useState('');
  const queryClient = useQueryClient();
  const post = useChange({
    mutationFn: (message: string) =>
      answer(
        api.POST('/v1/agents/{agentId}/conversations/{conversationId}/messages', {
          params: { path: { agentId, conversationId } },
          body: { text: message },
        }),
      ),
    onSuccess: (_accepted, sent) => {
      // What was typed while it was sending stays.
      setText((t) => (t === sent ? '' : t));
      // The live events read the turn as it runs; this read shows the message even before they come.
      void queryClient.invalidateQueries({ queryKey: transcriptQuery(agentId, conversationId).queryKey, exact: true });
    },
  });

  return (
    <section aria-labelledby={ids.heading}>
      <h3 id={ids.heading}>Talk to the fork</h3>
      <form
        className="card"
        onSubmit={(e) => {
          e.preventDefault();
          if (text.trim()) post.send(text);
        }}
      >
        <div className="field">
          <label htmlFor={ids.message}>Message</label>
          <textarea id={ids.message} rows={3} value={text} onChange={(e) => setText(e.target.value)} />
        </div>
        <ErrorAlert error={post.error} />
        <div className="actions">
          <button type="submit" className="button primary" disabled={post.isPending || !text.trim()}>
            Send
          </button>
          {post.isPending ? <span className="muted">Sending…</span> : null}
        </div>
      </form>
    </section>
  );
}
