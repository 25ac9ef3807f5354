import { useQueryClient } from '@tanstack/react-query';
import { useId, useState } from 'react';
import type { EvalRequest } from '../api-types';
import { answer, api } from '../api';
import { idsOf, parseCandidate } from '../candidate-json';
import { ErrorAlert } from '../error-alert';
import { evalsKey } from '../evals-query';
import { go } from '../routes';
import { useChange } from '../use-change';

const MODES: { mode: EvalRequest['mode']; label: string }[] = [
  { mode: 'replay', label: 'Replay: model answers from the recording, no model call' },
  { mode: 'live-model', label: 'Live model: calls the candidate model, metered' },
];

/**
 * Starts an evaluation of recorded conversations under a candidate, then opens it. The candidate is checked as JSON
 * here; what it holds, the API checks, and its refusal shows as it said it.
 */
export function EvalStart({ agentId }: { agentId: string }) {
  const ids = { suite: useId(), conversations: useId(), candidate: useId(), help: useId() };
  const [mode, setMode] = useState<EvalRequest['mode']>('replay');
  const [suite, setSuite] = useState('');
  const [conversations, setConversations] = useState('');
  const [candidateText, setCandidateText] = useState('');
  const [invalid, setInvalid] = useState<string | null>(null);
  const queryClient = useQueryClient();
  const start = useChange({
    mutationFn: (body: EvalRequest) =>
      answer(api.POST('/v1/agents/{agentId}/evals', { params: { path: { agentId } }, body })),
    onSuccess: (started) => {
      void queryClient.invalidateQueries({ queryKey: evalsKey(agentId) });
      go({ view: 'eval', agentId, evalId: started.id });
    },
  });

  const submit = () => {
    const parsed = parseCandidate(candidateText);
    if ('error' in parsed) return setInvalid(parsed.error);
    setInvalid(null);
    const conversationIds = idsOf(conversations);
    // No conversation named is no recorded case: the API says what an evaluation needs.
    start.send({
      mode,
      candidate: parsed.candidate,
      ...(suite.trim() ? { suite: suite.trim() } : {}),
      ...(conversationIds.length ? { recorded: { conversationIds } } : {}),
    });
  };

  return (
    <section aria-labelledby="eval-start-heading">
      <h3 id="eval-start-heading">Start an evaluation</h3>
      <form
        className="card"
        onSubmit={(e) => {
          e.preventDefault();
          submit();
        }}
      >
        <fieldset className="choices">
          <legend>Mode</legend>
          {MODES.map((m) => (
            <label key={m.mode} className="choice">
              <input
                type="radio"
                name="eval-mode"
                value={m.mode}
                checked={mode === m.mode}
                onChange={() => setMode(m.mode)}
              />{' '}
              {m.label}
            </label>
          ))}
        </fieldset>
        <div className="field">
          <label htmlFor={ids.conversations}>Conversation ids</label>
          <input
            id={ids.conversations}
            value={conversations}
            onChange={(e) => setConversations(e.target.value)}
            placeholder="c1, c2, …"
            autoComplete="off"
            spellCheck={false}
          />
        </div>
        <div className="field">
          <label htmlFor={ids.suite}>Suite (optional)</label>
          <input
            id={ids.suite}
            value={suite}
            onChange={(e) => setSuite(e.target.value)}
            maxLength={200}
            autoComplete="off"
          />
        </div>
        <div className="field">
          <label htmlFor={ids.candidate}>Candidate (JSON)</label>
          <p id={ids.help} className="muted">
            An overlay of the agent&apos;s configuration, never applied to it: systemPrompt, memoryVersion, model,
            toolPolicies, toolServers, budgets. Empty: the agent as it is.
          </p>
          <textarea
            id={ids.candidate}
            className="code-input"
            rows={6}
            value={candidateText}
            onChange={(e) => {
              setCandidateText(e.target.value);
              setInvalid(null);
            }}
            placeholder='{"systemPrompt": "…"}'
            aria-describedby={ids.help}
            aria-invalid={invalid ? true : undefined}
            spellCheck={false}
          />
        </div>
        <ErrorAlert error={invalid ?? start.error} />
        <div className="actions">
          <button type="submit" className="button primary" disabled={start.isPending}>
            Start evaluation
          </button>
          {start.isPending ? <span className="muted">Starting…</span> : null}
        </div>
      </form>
    </section>
  );
}
