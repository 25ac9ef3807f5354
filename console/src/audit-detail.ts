/** An audit entry's detail in one line: the API declares it unknown, each action's own shape (domain/audit.ts). */

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const count = (n: unknown, one: string, many: string) =>
  typeof n === 'number' ? `${n} ${n === 1 ? one : many}` : null;

/** A deletion's detail: its phase, and once finished what it did, e.g. "finished: 1 conversation, 1 workflow ended". */
function deletionDetail(detail: Record<string, unknown>): string {
  const counts = [
    count(detail.conversations, 'conversation', 'conversations'),
    count(detail.workflowsEnded, 'workflow ended', 'workflows ended'),
    count(detail.schedulesDeleted, 'schedule deleted', 'schedules deleted'),
  ].filter((c) => c !== null);
  const phase = typeof detail.phase === 'string' ? detail.phase : 'unknown phase';
  return counts.length ? `${phase}: ${counts.join(', ')}` : phase;
}

/** Any other detail as its fields, `name: value`, a value that is not text or a number as JSON. */
const fields = (detail: Record<string, unknown>) =>
  Object.entries(detail)
    .map(([name, value]) => `${name}: ${typeof value === 'string' ? value : JSON.stringify(value)}`)
    .join(', ');

export function auditDetail(action: string, detail: unknown): string {
  if (detail === null || detail === undefined) return '';
  if (!isRecord(detail)) return JSON.stringify(detail);
  if (action === 'conversation.delete' || action === 'agent.delete') return deletionDetail(detail);
  return fields(detail);
}
