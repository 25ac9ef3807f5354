/**
 * An agent's memory as a person reads it and rolls it back. Its versions are numbered without gaps and never change;
 * a proposal's admission (services/proposal-admission.ts) writes the others.
 */
import { lockAgent } from '../db/agents';
import { recordAudit } from '../db/audit';
import { currentMemory, memoryVersion, writeVersion } from '../db/memory';
import { inTransaction, type Pool } from '../db/pool';
import type { MemoryFiles } from '../domain/memory';

// Reads the API serves as they are (the first one brings version 1, the defaults, into being, as any first use does).
export { currentMemory, listVersions, memoryVersion, type MemoryVersion } from '../db/memory';

/** Thrown inside the rollback's transaction so that it rolls back: a refused rollback creates nothing. */
class NoSuchVersion extends Error {}

/**
 * Rolls the agent's memory back: a new version equal to version `toVersion` (every version stays readable), recorded
 * in the audit trail with it. Nothing when there is no such version.
 */
export async function rollBackMemory(
  pool: Pool,
  agentId: string,
  toVersion: number,
  actor: string,
): Promise<{ version: number; files: MemoryFiles; rollbackOf: number } | undefined> {
  try {
    return await inTransaction(pool, async (db) => {
      await lockAgent(db, agentId);
      await currentMemory(db, agentId); // version 1 exists from first use, also when this is the first
      const target = await memoryVersion(db, agentId, toVersion);
      if (!target) throw new NoSuchVersion();
      const v = await writeVersion(db, agentId, { files: target.files, kind: 'rollback', rollbackOf: target.version });
      await recordAudit(db, {
        agentId,
        action: 'memory.rollback',
        actor,
        subject: String(v.version),
        detail: { toVersion: target.version },
      });
      return { version: v.version, files: v.files, rollbackOf: target.version };
    });
  } catch (err) {
    if (err instanceof NoSuchVersion) return undefined;
    throw err;
  }
}
