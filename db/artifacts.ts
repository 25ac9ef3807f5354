/** The artifacts routine runs produce (`routine_artifacts`): one per run, numbered per producer within its app. */
import { randomBytes } from 'node:crypto';
import type { Queryable } from './pool';

export interface ArtifactRow {
  artifactId: string;
  runId: string;
  producedBy: string;
  number: number;
  title: string;
  content: string;
  createdAt: string;
}

interface ArtifactDbRow {
  artifact_id: string;
  run_id: string;
  produced_by: string;
  number: number;
  title: string;
  content: string;
  created_at: Date;
}

const artifactOf = (r: ArtifactDbRow): ArtifactRow => ({
  artifactId: r.artifact_id,
  runId: r.run_id,
  producedBy: r.produced_by,
  number: r.number,
  title: r.title,
  content: r.content,
  createdAt: r.created_at.toISOString(),
});

/**
 * Writes a run's artifact once, numbered 1 + the highest number of the same producer. Concurrent runs serialise on
 * the app row, so two runs never get the same number.
 */
export async function writeArtifact(
  db: Queryable,
  a: {
    agentId: string;
    appId: string;
    runId: string;
    producedBy: string;
    content: string;
    title: (n: number) => string;
  },
): Promise<ArtifactRow> {
  const existing = await db.query<ArtifactDbRow>('SELECT * FROM routine_artifacts WHERE run_id = $1', [a.runId]);
  if (existing.rows[0]) return artifactOf(existing.rows[0]);
  await db.query('SELECT 1 FROM apps WHERE agent_id = $1 AND app_id = $2 FOR UPDATE', [a.agentId, a.appId]);
  const { rows: top } = await db.query<{ n: number }>(
    `SELECT coalesce(max(number), 0) + 1 AS n FROM routine_artifacts
      WHERE agent_id = $1 AND app_id = $2 AND produced_by = $3`,
    [a.agentId, a.appId, a.producedBy],
  );
  const n = top[0]!.n;
  const { rows } = await db.query<ArtifactDbRow>(
    `INSERT INTO routine_artifacts (artifact_id, agent_id, app_id, run_id, produced_by, number, title, content)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`,
    [`art_${randomBytes(4).toString('hex')}`, a.agentId, a.appId, a.runId, a.producedBy, n, a.title(n), a.content],
  );
  return artifactOf(rows[0]!);
}

export async function getArtifact(
  db: Queryable,
  agentId: string,
  appId: string,
  artifactId: string,
): Promise<ArtifactRow | undefined> {
  const { rows } = await db.query<ArtifactDbRow>(
    'SELECT * FROM routine_artifacts WHERE agent_id = $1 AND app_id = $2 AND artifact_id = $3',
    [agentId, appId, artifactId],
  );
  return rows[0] && artifactOf(rows[0]);
}
