import { initialMemory, type MemoryFiles } from '../domain/memory';
import type { ProposalEdit } from '../domain/reflection';
import type { Queryable } from './pool';

export interface MemoryVersion {
  version: number;
  files: MemoryFiles;
  kind: 'initial' | 'proposal' | 'rollback';
  proposalId: string | null;
  changes: Pick<ProposalEdit, 'file' | 'action' | 'summary' | 'rationale' | 'conversationIds'>[];
  learnedFrom: string[];
  rollbackOf: number | null;
  createdAt: string;
}

export interface VersionRow {
  version: number;
  files: MemoryFiles;
  kind: MemoryVersion['kind'];
  proposal_id: string | null;
  changes: MemoryVersion['changes'];
  learned_from: string[];
  rollback_of: number | null;
  created_at: Date;
}

export const versionOf = (r: VersionRow): MemoryVersion => ({
  version: r.version,
  files: r.files,
  kind: r.kind,
  proposalId: r.proposal_id,
  changes: r.changes,
  learnedFrom: r.learned_from,
  rollbackOf: r.rollback_of,
  createdAt: r.created_at.toISOString(),
});

/**
 * The current memory of an agent; version 1 (the defaults) is stored on the agent's first use. An agent not yet in
 * being (never used, or deleted) reads its defaults unstored: reading never brings an agent into being.
 */
export async function currentMemory(db: Queryable, agentId: string): Promise<MemoryVersion> {
  const { rows } = await db.query<VersionRow>(
    'SELECT * FROM memory_versions WHERE agent_id = $1 ORDER BY version DESC LIMIT 1',
    [agentId],
  );
  if (rows[0]) return versionOf(rows[0]);
  const { rows: agent } = await db.query<{ name: string }>('SELECT name FROM agents WHERE id = $1', [agentId]);
  if (!agent[0]) return defaultMemory(agentId);
  await db.query(
    `INSERT INTO memory_versions (agent_id, version, files, kind) VALUES ($1, 1, $2, 'initial') ON CONFLICT DO NOTHING`,
    [agentId, JSON.stringify(initialMemory({ name: agent[0].name }))],
  );
  return currentMemory(db, agentId);
}

const defaultMemory = (agentId: string): MemoryVersion => ({
  version: 1,
  files: initialMemory({ name: agentId }),
  kind: 'initial',
  proposalId: null,
  changes: [],
  learnedFrom: [],
  rollbackOf: null,
  createdAt: new Date().toISOString(),
});

export async function memoryVersion(
  db: Queryable,
  agentId: string,
  version: number,
): Promise<MemoryVersion | undefined> {
  const { rows } = await db.query<VersionRow>('SELECT * FROM memory_versions WHERE agent_id = $1 AND version = $2', [
    agentId,
    version,
  ]);
  if (rows[0]) return versionOf(rows[0]);
  // Versions are gapless: no version 1 stored means none is, and version 1 is the defaults.
  return version === 1 ? currentMemory(db, agentId) : undefined;
}

export async function listVersions(db: Queryable, agentId: string): Promise<Omit<MemoryVersion, 'files'>[]> {
  const current = await currentMemory(db, agentId);
  const { rows } = await db.query<VersionRow>('SELECT * FROM memory_versions WHERE agent_id = $1 ORDER BY version', [
    agentId,
  ]);
  return (rows.length ? rows.map(versionOf) : [current]).map(({ files: _files, ...v }) => v);
}

/**
 * Writes the next version. The caller holds the agent's row lock (lockAgent), so versions are gapless and a
 * proposal applies at most once (unique proposal_id).
 */
export async function writeVersion(
  db: Queryable,
  agentId: string,
  v: {
    files: MemoryFiles;
    kind: 'proposal' | 'rollback';
    proposalId?: string;
    changes?: MemoryVersion['changes'];
    learnedFrom?: string[];
    rollbackOf?: number;
  },
): Promise<MemoryVersion> {
  const current = await currentMemory(db, agentId);
  const { rows } = await db.query<VersionRow>(
    `INSERT INTO memory_versions (agent_id, version, files, kind, proposal_id, changes, learned_from, rollback_of)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`,
    [
      agentId,
      current.version + 1,
      JSON.stringify(v.files),
      v.kind,
      v.proposalId ?? null,
      JSON.stringify(v.changes ?? []),
      JSON.stringify(v.learnedFrom ?? []),
      v.rollbackOf ?? null,
    ],
  );
  return versionOf(rows[0]!);
}
