import type { Divergence } from './api-types';

const PARTS: Record<Divergence['part'], string> = {
  model: 'the model',
  system: 'the system prompt',
  tools: 'the tools offered',
  messages: 'the messages',
};

/** A diff line's kind by its first character, as the API writes it ("- recorded", "+ candidate"). */
const lineClass = (line: string) => (line.startsWith('+') ? 'diff-added' : line.startsWith('-') ? 'diff-removed' : '');

/**
 * Where the candidate's model request first parted from the recorded one: the turn, the model call (1-based) and the
 * part, then the diff, its lines marked + and - so that it reads without colour too.
 */
export function DivergenceView({ divergence: d }: { divergence: Divergence }) {
  return (
    <div className="divergence">
      <p>
        Turn {d.turn}, model call {d.callIndex}: {PARTS[d.part] ?? d.part}
      </p>
      <pre className="diff">
        {d.diff.split('\n').map((line, i) => (
          <span key={i} className={lineClass(line) || undefined}>{`${line}\n`}</span>
        ))}
      </pre>
    </div>
  );
}
