/** How long a run took, in milliseconds: null while it runs. */
export function runDurationMs(startedAt: string, finishedAt: string | null): number | null {
  return finishedAt === null ? null : Math.max(0, Date.parse(finishedAt) - Date.parse(startedAt));
}
