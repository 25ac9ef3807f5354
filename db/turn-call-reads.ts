import type { Candidate } from '../domain/evals';
import type { ContentBlock } from '../domain/model';
import type { PinnedTool } from '../domain/tool-servers';
import type { TranscriptMessage } from '../domain/transcript';
import { toAgent, type AgentRecord, type AgentRow } from './agents';
import { versionOf, type MemoryVersion, type VersionRow } from './memory';
import type { Queryable } from './pool';
import { toToolServer, type ToolServerRecord, type ToolServerRow } from './tool-servers';

/** What a turn's model call reads before it asks the model. */
export interface TurnCallReads {
  /** The call's answer, when an earlier attempt committed it. */
  earlier?: { seq: number; content: ContentBlock[] };
  agent?: AgentRow;
  /** The transcript's window through the call's seq, oldest first. */
  transcript: TranscriptMessage[];
  /** Undefined until the agent's memory is first used (db/memory.ts currentMemory creates it). */
  memory?: MemoryVersion;
  /** The tool list pinned to the turn by its first model call, if one was. */
  pinned?: { hash: string; tools: PinnedTool[] };
  /** The agent's tool servers by name. */
  servers: ToolServerRow[];
  /** A fork's candidate, which its turns run under. */
  fork?: { candidate: Candidate };
  /** A job's conversation: its run under way, which the call is charged to, and the job's own budget for a run. */
  jobRun?: { runId?: string; budget: { usd?: number } };
}

/**
 * The reads of a turn's model call in one round trip: the same rows as findByOrigin, getAgent, loadTranscript,
 * currentMemory, pinnedTools and listToolServers read one statement each, and for a job's conversation the run a
 * call is charged to and its budget. A turn's step pays a round trip per statement, most of its worker's CPU
 * (bench/CHANGES-TRIED.md). Rows come as jsonb: their timestamps are revived.
 */
export async function readTurnCall(
  db: Queryable,
  q: {
    conversationKey: string;
    origin: string;
    agentId: string;
    throughSeq: number;
    window: number;
    turnId: string;
    /** The job whose conversation this is, if it is one. */
    jobId?: string;
  },
): Promise<TurnCallReads> {
  const { rows } = await db.query<{
    earlier: { seq: number; content: ContentBlock[] } | null;
    agent: Dated<AgentRecord, 'created_at' | 'updated_at'> | null;
    transcript: TranscriptMessage[];
    memory: Dated<VersionRow, 'created_at'> | null;
    pinned: { hash: string; tools: PinnedTool[] } | null;
    servers: Dated<ToolServerRecord, 'tools_listed_at' | 'created_at' | 'updated_at'>[];
    job_run: { runId: string | null; budgetUsd: string | null } | null;
    fork: { candidate: Candidate } | null;
  }>(
    `SELECT
       (SELECT to_jsonb(m) FROM (SELECT seq, content FROM messages WHERE conversation_key = $1 AND origin = $2) m)
         AS earlier,
       (SELECT to_jsonb(a) FROM agents a WHERE id = $3) AS agent,
       (SELECT COALESCE(jsonb_agg(t ORDER BY t.seq), '[]') FROM (
          SELECT seq, role, content FROM messages WHERE conversation_key = $1 AND seq <= $4 ORDER BY seq DESC LIMIT $5
        ) t) AS transcript,
       (SELECT to_jsonb(v) FROM memory_versions v WHERE agent_id = $3 ORDER BY version DESC LIMIT 1) AS memory,
       (SELECT jsonb_build_object('hash', p.hash, 'tools', l.tools)
          FROM turn_tool_lists p JOIN tool_lists l USING (hash) WHERE p.transcript_key = $1 AND p.turn_id = $6)
         AS pinned,
       (SELECT COALESCE(jsonb_agg(s ORDER BY s.name), '[]') FROM tool_servers s WHERE agent_id = $3) AS servers,
       (SELECT jsonb_build_object(
          'runId', (SELECT run_id FROM job_runs WHERE job_id = $7 AND status = 'running'),
          'budgetUsd', (SELECT budget_usd::text FROM jobs WHERE id = $7))
          WHERE $7::text IS NOT NULL) AS job_run,
       (SELECT jsonb_build_object('candidate', f.candidate) FROM conversation_forks f WHERE f.conversation_key = $1)
         AS fork`,
    [q.conversationKey, q.origin, q.agentId, q.throughSeq, q.window, q.turnId, q.jobId ?? null],
  );
  const r = rows[0]!;
  return {
    ...(r.earlier ? { earlier: r.earlier } : {}),
    ...(r.agent ? { agent: toAgent(revive(r.agent, 'created_at', 'updated_at')) } : {}),
    transcript: r.transcript,
    ...(r.memory ? { memory: versionOf(revive(r.memory, 'created_at')) } : {}),
    ...(r.pinned ? { pinned: r.pinned } : {}),
    servers: r.servers.map((s) => toToolServer(revive(s, 'tools_listed_at', 'created_at', 'updated_at'))),
    ...(r.job_run ? { jobRun: jobRunOf(r.job_run) } : {}),
    ...(r.fork ? { fork: r.fork } : {}),
  };
}

function jobRunOf(row: { runId: string | null; budgetUsd: string | null }): NonNullable<TurnCallReads['jobRun']> {
  return {
    ...(row.runId === null ? {} : { runId: row.runId }),
    budget: row.budgetUsd === null ? {} : { usd: Number(row.budgetUsd) },
  };
}

/** A row as jsonb has it: its timestamps as text. */
type Dated<R, K extends keyof R> = Omit<R, K> & Record<K, string>;

function revive<R, K extends keyof R>(row: Dated<R, K>, ...keys: K[]): R {
  const dates = Object.fromEntries(keys.map((k) => [k, new Date(row[k] as string)]));
  return { ...row, ...dates } as R;
}
