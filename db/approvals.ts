import type { Delivery } from '../domain/delivery';
import type { MemoryFiles } from '../domain/memory';
import { DEFAULT_REFLECTION_SETTINGS } from '../domain/reflection';
import { ROUTINES } from '../domain/routines';
import { memoryVersion } from './memory';
import { exactInstant, type PageRequest } from './page';
import type { Queryable } from './pool';
import { proposalsByIds, type ProposalRow } from './proposals';
import { toolCallsByIds, type ToolCallRow } from './tool-calls';
import { gatedTargets } from './routine-journal';
import { runsByIds, type RoutineRunRow } from './routine-runs';
import { routineLabels, routineRef } from './routines';

/** What waits for a person's decision, in each table that holds such things (the approvals list and its counts). */
export const WAITING_FOR_DECISION = {
  routineRuns: "status = 'needs_approval'",
  proposals: "status = 'awaiting_approval'",
  toolCalls: "status = 'awaiting_approval'",
} as const;

/** Something waiting for a person's decision: a routine run stopped at a gate, a reflection proposal, a tool call. */
export interface WaitingApproval {
  kind: 'routine_run' | 'proposal' | 'tool_call';
  agentId: string;
  /** The run's, the proposal's or the tool call's id (UUIDs, so unique across the three). */
  id: string;
  waitingSince: string;
  expiresAt: string;
  /** `waitingSince` to the microsecond: the list's sort key with `id`. */
  sortAt: string;
}

/**
 * What waits for a decision, oldest first (ties by id), of one agent or of every agent. Rows that began waiting before
 * the waits were recorded (migration 1765699200000) have no recorded end: their wait is taken to be the default
 * (7 days), which a deployment that configured another length (KEEL_ROUTINE_APPROVAL_WAIT_MS,
 * KEEL_REFLECTION_APPROVAL_WAIT_MS) does not have; and such a run is taken to have waited since its gated call was
 * journaled.
 */
export async function listWaitingApprovals(
  db: Queryable,
  scope: { agentId?: string },
  page: PageRequest<{ at: string; id: string }>,
): Promise<WaitingApproval[]> {
  const { rows } = await db.query<{
    kind: WaitingApproval['kind'];
    agent_id: string;
    id: string;
    waiting_since: Date;
    expires_at: Date;
    sort_at: string;
  }>(
    `SELECT kind, agent_id, id, waiting_since, expires_at, ${exactInstant('waiting_since')} AS sort_at FROM (
       SELECT 'routine_run' AS kind, agent_id, run_id AS id, since AS waiting_since,
              coalesce(approval_expires_at, since + $5::bigint * interval '1 millisecond') AS expires_at
         FROM (SELECT r.*,
                      coalesce(r.waiting_since,
                               (SELECT max(c.created_at) FROM routine_calls c
                                 WHERE c.run_id = r.run_id AND c.outcome = 'gated'),
                               r.fired_at) AS since
                 FROM routine_runs r WHERE r.${WAITING_FOR_DECISION.routineRuns}) r
       UNION ALL
       SELECT 'proposal', agent_id, id, created_at,
              coalesce(approval_expires_at, created_at + $6::bigint * interval '1 millisecond')
         FROM proposals WHERE ${WAITING_FOR_DECISION.proposals}
       UNION ALL
       SELECT 'tool_call', agent_id, id::text, waiting_since, expires_at
         FROM tool_calls WHERE ${WAITING_FOR_DECISION.toolCalls}
     ) w
     WHERE ($1::text IS NULL OR agent_id = $1)
       AND ($2::timestamptz IS NULL OR (waiting_since, id) > ($2::timestamptz, $3::text))
     ORDER BY waiting_since, id LIMIT $4`,
    [
      scope.agentId ?? null,
      page.after?.at ?? null,
      page.after?.id ?? null,
      page.limit,
      ROUTINES.approvalWaitMs,
      DEFAULT_REFLECTION_SETTINGS.approvalWaitMs,
    ],
  );
  return rows.map((r) => ({
    kind: r.kind,
    agentId: r.agent_id,
    id: r.id,
    waitingSince: r.waiting_since.toISOString(),
    expiresAt: r.expires_at.toISOString(),
    sortAt: r.sort_at,
  }));
}

/** A waiting approval with what a person deciding on it reads. */
export type PendingApproval =
  | (WaitingApproval & {
      kind: 'routine_run';
      run: RoutineRunRow;
      /** The routine's label; null when the routine was deleted since. */
      label: string | null;
      /** Where the gated call would send (its journaled target); null for a gate without one. */
      target: Delivery | null;
    })
  | (WaitingApproval & {
      kind: 'proposal';
      proposal: ProposalRow;
      /** The memory the proposal was made against (its base version). */
      baseFiles: MemoryFiles;
    })
  | (WaitingApproval & { kind: 'tool_call'; call: ToolCallRow });

/** listWaitingApprovals, each with its run or proposal. One decided meanwhile is shown as it was read. */
export async function pendingApprovals(
  db: Queryable,
  scope: { agentId?: string },
  page: PageRequest<{ at: string; id: string }>,
): Promise<PendingApproval[]> {
  const waiting = await listWaitingApprovals(db, scope, page);
  const ids = (kind: WaitingApproval['kind']) => waiting.filter((w) => w.kind === kind).map((w) => w.id);
  const [runs, targets, proposals, toolCalls] = await Promise.all([
    runsByIds(db, ids('routine_run')),
    gatedTargets(db, ids('routine_run')),
    proposalsByIds(db, ids('proposal')),
    toolCallsByIds(db, ids('tool_call')),
  ]);
  const labels = await routineLabels(db, runs);
  const bases = new Map<string, MemoryFiles>();
  for (const p of proposals) {
    const key = `${p.agentId}/${p.baseVersion}`;
    if (!bases.has(key)) bases.set(key, (await memoryVersion(db, p.agentId, p.baseVersion))?.files ?? {});
  }
  const runById = new Map(runs.map((r) => [r.runId, r]));
  const proposalById = new Map(proposals.map((p) => [p.id, p]));
  const callById = new Map(toolCalls.map((c) => [c.id, c]));
  return waiting.flatMap((w): PendingApproval[] => {
    if (w.kind === 'tool_call') {
      const call = callById.get(w.id);
      return call ? [{ ...w, kind: 'tool_call', call }] : [];
    }
    if (w.kind === 'routine_run') {
      const run = runById.get(w.id);
      if (!run) return [];
      const label = labels.get(routineRef(run)) ?? null;
      return [{ ...w, kind: 'routine_run', run, label, target: targets.get(w.id) ?? null }];
    }
    const proposal = proposalById.get(w.id);
    if (!proposal) return [];
    return [{ ...w, kind: 'proposal', proposal, baseFiles: bases.get(`${proposal.agentId}/${proposal.baseVersion}`)! }];
  });
}
