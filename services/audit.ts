/**
 * The audit trail: who decided what, and when. Each entry is written by the service that makes the change it records
 * (in that change's transaction when the change is Keel's own), so this module holds only what the API reads of it.
 */

// Reads the API serves as they are, and the shape of an entry to record.
export { listAudit, type AuditEntry, type NewAuditEntry } from '../db/audit';
