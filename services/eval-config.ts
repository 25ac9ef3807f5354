import { getAgent } from '../db/agents';
import { currentMemory, memoryVersion } from '../db/memory';
import type { Pool } from '../db/pool';
import { listToolServers } from '../db/tool-servers';
import type { Candidate } from '../domain/evals';
import type { MemoryFiles } from '../domain/memory';
import type { Budgets } from '../domain/spend';
import type { PinnedTool } from '../domain/tool-servers';
import { offeredServerTools } from './turn-tools';

/** An agent's configuration as a turn reads it, with a candidate's overlay over it. */
export interface AgentConfig {
  name: string;
  systemPrompt: string | null;
  model: string;
  memory: MemoryFiles;
  budgets: Budgets;
  /** The enabled servers' tools as a turn begun now would be offered them (a written case's). */
  serverTools: PinnedTool[];
}

/** The agent's configuration under the candidate (an empty candidate: the agent's own). Nothing is changed. */
export async function agentConfigFor(
  pool: Pool,
  agentId: string,
  candidate: Candidate,
  defaultModel: string,
): Promise<AgentConfig> {
  const [agent, memory, servers] = await Promise.all([
    getAgent(pool, agentId),
    candidate.memoryVersion === undefined
      ? currentMemory(pool, agentId)
      : memoryVersion(pool, agentId, candidate.memoryVersion),
    listToolServers(pool, agentId),
  ]);
  if (!agent) throw new Error(`agent ${agentId} is not recorded`);
  if (!memory) throw new Error(`agent ${agentId} has no memory version ${candidate.memoryVersion}`);
  return {
    name: agent.name,
    systemPrompt: candidate.systemPrompt === undefined ? agent.systemPrompt : candidate.systemPrompt,
    model: candidate.model ?? agent.model ?? defaultModel,
    memory: memory.files,
    budgets: { ...agent.budgets, ...candidate.budgets },
    serverTools: offeredServerTools(servers.filter((s) => s.enabled)),
  };
}
