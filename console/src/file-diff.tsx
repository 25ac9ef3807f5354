import { diffLines } from 'diff';
import { useMemo } from 'react';

/** Unchanged runs longer than this are folded to their first and last CONTEXT lines. */
const FOLD_OVER = 8;
const CONTEXT = 3;

type Line = { kind: 'added' | 'removed' | 'same'; text: string } | { kind: 'folded'; count: number };

/** The lines of a change, each marked +, - or unchanged, long unchanged stretches folded. */
export function diffOf(before: string, after: string): Line[] {
  const lines: Line[] = [];
  for (const part of diffLines(before, after)) {
    const texts = part.value.replace(/\n$/, '').split('\n');
    if (part.added || part.removed) {
      for (const text of texts) lines.push({ kind: part.added ? 'added' : 'removed', text });
    } else if (texts.length > FOLD_OVER) {
      lines.push(...texts.slice(0, CONTEXT).map((text) => ({ kind: 'same' as const, text })));
      lines.push({ kind: 'folded', count: texts.length - 2 * CONTEXT });
      lines.push(...texts.slice(-CONTEXT).map((text) => ({ kind: 'same' as const, text })));
    } else {
      lines.push(...texts.map((text) => ({ kind: 'same' as const, text })));
    }
  }
  return lines;
}

const PREFIX = { added: '+', removed: '-', same: ' ' } as const;

/**
 * One file's change as a region named "Changes to <path>": every line prefixed + (added), - (removed) or a space, so
 * the change reads without colour too. `null` is a file that does not exist on that side.
 */
export function FileDiff({ path, before, after }: { path: string; before: string | null; after: string | null }) {
  const lines = useMemo(() => diffOf(before ?? '', after ?? ''), [before, after]);
  const what =
    before === null
      ? 'new file'
      : after === null
        ? 'file removed'
        : lines.some((l) => l.kind === 'added' || l.kind === 'removed')
          ? null
          : 'no change';
  return (
    <section className="file-diff" aria-label={`Changes to ${path}`}>
      <h4 className="file-diff-path">
        <code>{path}</code>
        {what ? <span className="muted"> ({what})</span> : null}
      </h4>
      <pre className="diff">
        {lines.map((l, i) =>
          l.kind === 'folded' ? (
            <span key={i} className="diff-folded">{`  ⋯ ${l.count} unchanged lines\n`}</span>
          ) : (
            <span key={i} className={`diff-${l.kind}`}>{`${PREFIX[l.kind]}${l.text}\n`}</span>
          ),
        )}
      </pre>
    </section>
  );
}
