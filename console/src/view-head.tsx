import type { Ref } from 'react';

/** A view's heading (focused as the view opens) with its Refresh button, shown when there is something to refresh. */
export function ViewHead(props: {
  title: string;
  headingRef: Ref<HTMLHeadingElement>;
  onRefresh?: () => void;
  loading: boolean;
}) {
  return (
    <div className="view-head">
      <h2 id="view-heading" ref={props.headingRef} tabIndex={-1}>
        {props.title}
      </h2>
      {props.onRefresh ? (
        <button type="button" className="button" onClick={props.onRefresh} disabled={props.loading}>
          Refresh
        </button>
      ) : null}
    </div>
  );
}
