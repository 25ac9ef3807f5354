import { getAgent } from '../db/agents';
import { currentMemory, memoryVersion } from '../db/memory';
import type { Pool } from '../db/pool';
import { listToolServers } from '../db/tool-servers';
import type { AgentConfig, Candidate, EvalConfigs } from '../domain/evals';
import { offeredServerTools } from './turn-tools';

/** The agent's configuration under the candidate (an empty candidate: the agent's own). Nothing is changed. */
export async function agentConfigFor(pool: Pool, agentId: string, candidate: Candidate): Promise<AgentConfig> {
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
    model: candidate.model ?? agent.model,
    memory: memory.files,
    budgets: { ...agent.budgets, ...candidate.budgets },
    serverTools: offeredServerTools(servers.filter((s) => s.enabled)),
  };
}

/** The configurations an evaluation runs under, read once as it begins: the agent's own, and the candidate's. */
export async function evalConfigs(pool: Pool, agentId: string, candidate: Candidate): Promise<EvalConfigs> {
  const [recorded, underCandidate] = await Promise.all([
    agentConfigFor(pool, agentId, {}),
    agentConfigFor(pool, agentId, candidate),
  ]);
  return { recorded, candidate: underCandidate };
}
