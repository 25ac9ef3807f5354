import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { putApp } from '../db/apps';
import { createPool, inTransaction, type Pool } from '../db/pool';
import { writeArtifact } from '../db/artifacts';
import { beginRun } from '../db/routine-runs';
import { listTools, saveTool } from '../db/routine-tools';
import { uniqueId } from './support/keel';

let pool: Pool;
beforeAll(() => {
  pool = createPool(inject('databaseUrl'));
});
afterAll(async () => pool?.end());

const tool = (code: string) => ({ name: 'scoreLeads', title: 'Lead Scorer', purpose: 'p', inputs: ['input'], code });

describe('routine storage (real PostgreSQL)', () => {
  it('a tool saved again under its name is version + 1; older versions keep their code; one save per run', async () => {
    const a = uniqueId('a');
    await putApp(pool, a, 'crm', { name: 'CRM', tables: [] });
    const v1 = await saveTool(pool, a, 'crm', tool('one'), 'model', 'run-1');
    const v2 = await saveTool(pool, a, 'crm', tool('two'), 'model', 'run-2');
    const retried = await saveTool(pool, a, 'crm', tool('two'), 'model', 'run-2');
    expect([v1.version, v2.version, retried.version]).toEqual([1, 2, 2]);
    expect((await listTools(pool, a, 'crm')).map((t) => [t.name, t.version, t.code])).toEqual([
      ['scoreLeads', 2, 'two'],
    ]);
    const { rows } = await pool.query<{ version: number; code: string }>(
      'SELECT version, code FROM routine_tools WHERE agent_id = $1 ORDER BY version',
      [a],
    );
    expect(rows).toEqual([
      { version: 1, code: 'one' },
      { version: 2, code: 'two' },
    ]);
  });

  it('concurrent runs get collision-free artifact numbers', async () => {
    const a = uniqueId('a');
    await putApp(pool, a, 'crm', { name: 'CRM', tables: [] });
    const written = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        inTransaction(pool, (db) =>
          writeArtifact(db, {
            agentId: a,
            appId: 'crm',
            runId: `${a}-run-${i}`,
            producedBy: 'scoreLeads',
            content: `#${i}`,
            title: (n) => `score-leads-run-${n}.md`,
          }),
        ),
      ),
    );
    expect(written.map((w) => w.number).sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('at most one run of a routine is in flight', async () => {
    const a = uniqueId('a');
    const base = { agentId: a, appId: 'crm', slug: 's', firedAt: new Date(), prompt: 'p', sessionId: 'routine:crm:s' };
    const first = await beginRun(pool, { ...base, runId: `${a}-1`, workflowId: 'w' });
    const second = await beginRun(pool, { ...base, runId: `${a}-2`, workflowId: 'w' });
    expect(first.kind).toBe('begun');
    expect(second).toMatchObject({ kind: 'busy', running: { runId: `${a}-1` } });
  });
});
