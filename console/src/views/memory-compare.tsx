import { useQuery } from '@tanstack/react-query';
import { useEffect, useId, useState } from 'react';
import type { MemoryVersion } from '../api-types';
import { answer, api } from '../api';
import { ErrorAlert } from '../error-alert';
import { FileDiff } from '../file-diff';

/** One memory version with its files: a version never changes, so it is read once. */
function useVersion(agentId: string, version: number) {
  return useQuery({
    queryKey: ['agents', agentId, 'memory', 'versions', version],
    queryFn: ({ signal }) =>
      answer(
        api.GET('/v1/agents/{agentId}/memory/versions/{version}', { params: { path: { agentId, version } }, signal }),
      ),
    staleTime: Infinity,
  });
}

/** Two memory versions side by side: every file that differs between them, as a diff. */
export function MemoryCompare({ agentId, versions }: { agentId: string; versions: MemoryVersion[] }) {
  const fromId = useId();
  const toId = useId();
  const numbers = versions.map((v) => v.version).sort((a, b) => a - b);
  const latest = numbers[numbers.length - 1] ?? 1;
  const [from, setFrom] = useState(Math.max(1, latest - 1));
  const [to, setTo] = useState(latest);
  // A new version (a rollback, a proposal) moves the comparison to it.
  useEffect(() => {
    setFrom(Math.max(1, latest - 1));
    setTo(latest);
  }, [latest]);
  const older = useVersion(agentId, from);
  const newer = useVersion(agentId, to);
  const [a, b] = [older.data, newer.data];
  const paths = a && b ? [...new Set([...Object.keys(a.files), ...Object.keys(b.files)])].sort() : [];
  const changed = a && b ? paths.filter((p) => a.files[p] !== b.files[p]) : [];

  const select = (id: string, label: string, value: number, set: (v: number) => void) => (
    <div className="field inline">
      <label htmlFor={id}>{label}</label>
      <select id={id} value={value} onChange={(e) => set(Number(e.target.value))}>
        {numbers.map((n) => (
          <option key={n} value={n}>
            {n}
          </option>
        ))}
      </select>
    </div>
  );

  return (
    <section aria-labelledby="compare-heading">
      <h3 id="compare-heading">Compare versions</h3>
      <div className="row-fields">
        {select(fromId, 'From version', from, setFrom)}
        {select(toId, 'To version', to, setTo)}
      </div>
      <ErrorAlert error={older.error ?? newer.error} />
      {older.isLoading || newer.isLoading ? <p className="muted">Loading…</p> : null}
      {a && b && changed.length === 0 ? (
        <p className="notice">
          Versions {from} and {to} hold the same files.
        </p>
      ) : null}
      {a && b
        ? changed.map((p) => <FileDiff key={p} path={p} before={a.files[p] ?? null} after={b.files[p] ?? null} />)
        : null}
    </section>
  );
}
