import { useId } from 'react';

/** A list's search field: what is typed, shown as typed; the list asks with it once typing pauses (useDebounced). */
export function SearchBox(props: {
  label: string;
  placeholder: string;
  value: string;
  onChange: (value: string) => void;
}) {
  const id = useId();
  return (
    <form role="search" className="field inline" onSubmit={(e) => e.preventDefault()}>
      <label htmlFor={id}>{props.label}</label>
      <input
        id={id}
        type="search"
        value={props.value}
        onChange={(e) => props.onChange(e.target.value)}
        placeholder={props.placeholder}
        autoComplete="off"
        spellCheck={false}
      />
    </form>
  );
}
