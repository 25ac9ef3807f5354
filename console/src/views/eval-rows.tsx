import type { EvalBlock, EvalRow } from '../api-types';

const WHO: Record<EvalRow['role'], string> = { user: 'User', assistant: 'Assistant', system: 'Note', tool: 'Tool' };

/** A content block as text: a text as it is, a tool call as `name {arguments}`, a tool result as its content. */
function blockText(b: EvalBlock): string {
  switch (b.type) {
    case 'text':
      return b.text;
    case 'tool_use':
      return `${b.name} ${JSON.stringify(b.input)}`;
    case 'tool_result':
      return b.is_error ? `(error) ${b.content}` : b.content;
  }
}

/** A turn's rows as a case keeps them, each with its role, its blocks one under the other. */
export function EvalRows({ rows }: { rows: readonly EvalRow[] }) {
  if (rows.length === 0) return <p className="notice">No rows.</p>;
  return (
    <>
      {rows.map((r, i) => (
        <div key={i} className={`msg ${r.role}`}>
          <p className="who">{WHO[r.role] ?? r.role}</p>
          {r.content.map((b, j) =>
            b.type === 'text' ? (
              <p key={j} className="text">
                {blockText(b)}
              </p>
            ) : (
              <pre key={j} className="text">
                {blockText(b)}
              </pre>
            ),
          )}
        </div>
      ))}
    </>
  );
}
