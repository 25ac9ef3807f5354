import { useEffect, useId, useState } from 'react';

/** The agent the per-agent views show, taken when Enter is pressed or the field is left. */
export function AgentField({ agentId, onChange }: { agentId: string; onChange: (agentId: string) => void }) {
  const id = useId();
  const [typed, setTyped] = useState(agentId);
  useEffect(() => setTyped(agentId), [agentId]);
  const take = () => {
    const next = typed.trim();
    if (next !== agentId) onChange(next);
  };
  return (
    <form
      className="agent-field"
      onSubmit={(e) => {
        e.preventDefault();
        take();
      }}
    >
      <label htmlFor={id}>Agent</label>
      <input
        id={id}
        value={typed}
        onChange={(e) => setTyped(e.target.value)}
        onBlur={take}
        placeholder="agent id"
        autoComplete="off"
        spellCheck={false}
      />
    </form>
  );
}
