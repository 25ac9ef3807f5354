import { WAITING_FOR_DECISION } from './approvals';
import { containing, type PageRequest } from './page';
import type { Queryable } from './pool';

/** An agent as the list of agents shows it: what it is, what it has, and how recently it did anything. */
export interface AgentSummary {
  agentId: string;
  name: string;
  model: string | null;
  conversations: number;
  jobs: number;
  routines: number;
  /** Routine runs, proposals and tool calls of the agent that wait for a person's decision. */
  waitingApprovals: number;
  /** The latest of the agent's change and its conversations' turns (jobs' and routines' included). */
  lastActivityAt: string;
}

/**
 * Agents by id, each with its counts; only `scope`'s agent unless it is `*`. `q` is a part of the id or the name,
 * ignoring case.
 */
export async function listAgents(
  db: Queryable,
  filter: { scope: string; q?: string },
  page: PageRequest<string>,
): Promise<AgentSummary[]> {
  const { rows } = await db.query<{
    id: string;
    name: string;
    model: string | null;
    conversations: string;
    jobs: string;
    routines: string;
    waiting: string;
    last_activity_at: Date;
  }>(
    `SELECT a.id, a.name, a.model,
            (SELECT count(*) FROM conversations c WHERE c.agent_id = a.id) AS conversations,
            (SELECT count(*) FROM jobs j WHERE j.agent_id = a.id) AS jobs,
            (SELECT count(*) FROM routines r WHERE r.agent_id = a.id) AS routines,
            (SELECT count(*) FROM routine_runs r WHERE r.agent_id = a.id AND r.${WAITING_FOR_DECISION.routineRuns})
              + (SELECT count(*) FROM proposals p WHERE p.agent_id = a.id AND p.${WAITING_FOR_DECISION.proposals})
              + (SELECT count(*) FROM tool_calls t WHERE t.agent_id = a.id AND t.${WAITING_FOR_DECISION.toolCalls})
              AS waiting,
            greatest(a.updated_at,
                     (SELECT max(greatest(t.created_at, t.started_at, t.finished_at))
                        FROM conversations c JOIN turns t ON t.conversation_key = c.key
                       WHERE c.agent_id = a.id)) AS last_activity_at
       FROM agents a
      WHERE ($1::text = '*' OR a.id = $1)
        AND ($2::text IS NULL OR a.id ILIKE $2 ESCAPE '\\' OR a.name ILIKE $2 ESCAPE '\\')
        AND ($3::text IS NULL OR a.id > $3)
      ORDER BY a.id LIMIT $4`,
    [filter.scope, filter.q === undefined ? null : containing(filter.q), page.after ?? null, page.limit],
  );
  return rows.map((r) => ({
    agentId: r.id,
    name: r.name,
    model: r.model,
    conversations: Number(r.conversations),
    jobs: Number(r.jobs),
    routines: Number(r.routines),
    waitingApprovals: Number(r.waiting),
    lastActivityAt: r.last_activity_at.toISOString(),
  }));
}
