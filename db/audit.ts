import type { AuditAction } from '../domain/audit';
import type { Queryable } from './pool';

export interface AuditEntry {
  id: number;
  at: string;
  /** One of AUDIT_ACTIONS when written by this version; an older or newer Keel may have written others. */
  action: string;
  actor: string;
  subject: string;
  detail: unknown;
}

interface AuditRecord {
  id: string;
  at: Date;
  action: string;
  actor: string;
  subject: string;
  detail: unknown;
}

/** A decision to record. */
export interface NewAuditEntry {
  agentId: string;
  action: AuditAction;
  actor: string;
  subject: string;
  detail?: unknown;
}

/** An audit entry's detail as stored (jsonb, or null when there is none): the audit trail's and the jobs' log's. */
export const auditDetail = (detail: unknown): string | null => (detail === undefined ? null : JSON.stringify(detail));

/** One decision, written with the change it records when `db` is that change's transaction. */
export async function recordAudit(db: Queryable, e: NewAuditEntry): Promise<void> {
  const values = [e.agentId, e.action, e.actor, e.subject, auditDetail(e.detail)];
  await db.query(
    'INSERT INTO audit_trail (agent_id, action, actor, subject, detail) VALUES ($1, $2, $3, $4, $5)',
    values,
  );
}

/** An agent's entries, newest first: at most `limit`, all older than the entry `before` when given. */
export async function listAudit(
  db: Queryable,
  agentId: string,
  page: { limit: number; before?: number },
): Promise<AuditEntry[]> {
  const { rows } = await db.query<AuditRecord>(
    `SELECT id, at, action, actor, subject, detail FROM audit_trail
     WHERE agent_id = $1 AND ($2::bigint IS NULL OR id < $2) ORDER BY id DESC LIMIT $3`,
    [agentId, page.before ?? null, page.limit],
  );
  return rows.map((r) => ({ ...r, id: Number(r.id), at: r.at.toISOString() }));
}
