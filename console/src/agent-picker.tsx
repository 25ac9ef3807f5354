import { keepPreviousData, useInfiniteQuery } from '@tanstack/react-query';
import { useContext, useEffect, useMemo, useState } from 'react';
import {
  Button,
  ComboBox,
  ComboBoxStateContext,
  Group,
  Input,
  Label,
  ListBox,
  ListBoxItem,
  Popover,
} from 'react-aria-components';
import { agentsQuery } from './agents-query';
import type { AgentSummary } from './api-types';
import { useDebounced } from './use-debounced';

const contains = (text: string, part: string) => text.toLowerCase().includes(part.toLowerCase());

/**
 * Opens the combobox's list when what is typed changes and some agent other than the one it names exactly matches
 * it. The list does not open for an id typed whole (there is nothing to suggest, and Enter takes it), and it stays
 * closed after Escape until the next key.
 */
function SuggestWhileTyping({ typed, suggest }: { typed: string; suggest: boolean }) {
  const state = useContext(ComboBoxStateContext);
  useEffect(() => {
    if (suggest && state?.isFocused && !state.isOpen) state.open(null, 'manual');
    // Only a new text or new suggestions open it: not each render of the state.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [typed, suggest]);
  return null;
}

/**
 * The agent the per-agent views show: a combobox over the list of agents, searched by id or name as one types. An id
 * the list does not hold is taken too, when Enter is pressed or the field is left: an agent comes into being on first
 * use.
 */
export function AgentPicker({ agentId, onChange }: { agentId: string; onChange: (agentId: string) => void }) {
  const [typed, setTyped] = useState(agentId);
  useEffect(() => setTyped(agentId), [agentId]);
  // Until something else is typed the field shows the chosen agent, and the list offers every agent.
  const searching = typed !== agentId;
  const q = useDebounced(searching ? typed.trim() : '');
  // The last answer stays shown (filtered as typed) while the next search is on its way.
  const list = useInfiniteQuery({ ...agentsQuery(q), placeholderData: keepPreviousData });
  // Filtered here, by id or name: react-aria's own filter reads an item's text only (its id).
  const shown = useMemo(() => {
    const agents = list.data ?? [];
    const part = typed.trim();
    return searching ? agents.filter((a) => contains(a.agentId, part) || contains(a.name, part)) : agents;
  }, [list.data, typed, searching]);
  const take = (next: string) => {
    const id = next.trim();
    setTyped(id);
    if (id !== agentId) onChange(id);
  };

  return (
    <ComboBox
      className="agent-field"
      allowsCustomValue
      // Opened by the arrow keys, the button, or SuggestWhileTyping: react-aria's own opening on each key would show
      // the list (and announce its size) for an id typed whole.
      menuTrigger="manual"
      items={shown}
      selectedKey={agentId || null}
      onSelectionChange={(key) => key !== null && take(String(key))}
      inputValue={typed}
      onInputChange={setTyped}
    >
      <Label>Agent</Label>
      <SuggestWhileTyping typed={typed} suggest={searching && shown.some((a) => a.agentId !== typed.trim())} />
      <Group className="agent-combo">
        <Input
          placeholder="agent id"
          spellCheck={false}
          onKeyDown={(e) => {
            // No agent of the list highlighted: what was typed is the agent.
            if (e.key === 'Enter' && !e.currentTarget.getAttribute('aria-activedescendant')) take(typed);
          }}
          onBlur={() => take(typed)}
        />
        {/* Named by react-aria's own words ("Show suggestions"), not the field's label: only the field is "Agent". */}
        <Button className="button agent-combo-button" aria-labelledby="">
          ▾
        </Button>
      </Group>
      <Popover className="agent-popover">
        {/* As the button: react-aria's "Suggestions", so that the field is the one thing its label names. */}
        <ListBox<AgentSummary> className="agent-options" aria-labelledby="">
          {(a) => (
            <ListBoxItem id={a.agentId} textValue={a.agentId} className="agent-option">
              <span className="agent-option-id">{a.agentId}</span>
              {a.name && a.name !== a.agentId ? <span className="muted"> {a.name}</span> : null}
            </ListBoxItem>
          )}
        </ListBox>
      </Popover>
    </ComboBox>
  );
}
