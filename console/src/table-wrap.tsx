import type { ReactNode } from 'react';

/**
 * A table that scrolls sideways on a narrow screen: a named region in the tab order, so that it can be scrolled from
 * the keyboard too.
 */
export function TableWrap({ label, children }: { label: string; children: ReactNode }) {
  return (
    <div className="table-wrap" role="region" aria-label={label} tabIndex={0}>
      {children}
    </div>
  );
}
