import type { ReactNode } from 'react';

/**
 * A table that scrolls sideways on a narrow screen: a named region in the tab order, so that it can be scrolled from
 * the keyboard too. With `keepFirstColumn` its first column stays in view as it scrolls, so that each row still
 * says what it is about.
 */
export function TableWrap(props: { label: string; keepFirstColumn?: boolean; children: ReactNode }) {
  return (
    <div
      className={props.keepFirstColumn ? 'table-wrap keep-first' : 'table-wrap'}
      role="region"
      aria-label={props.label}
      tabIndex={0}
    >
      {props.children}
    </div>
  );
}
