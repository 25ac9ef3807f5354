import { createHash } from 'node:crypto';
import type { Pool } from '../db/pool';
import { pinnedTools, pinTools } from '../db/tool-lists';
import { listToolServers, type ToolServerRow } from '../db/tool-servers';
import { canonicalJson } from '../domain/canonical-json';
import type { ToolDefinition } from '../domain/model';
import { serverTools, type PinnedTool } from '../domain/tool-servers';

type PinnedList = { hash: string; tools: PinnedTool[] };

/**
 * Lists pinned lately, by turn: a pin never changes once made, so a turn's later steps on this worker (its tool calls,
 * its next model calls) need not read it again. Bounded, and the lists are shared by hash: most turns of an agent pin
 * the same list.
 */
const recentPins = new Map<string, PinnedList>();
const RECENT_PINS = 64;
const pinKey = (transcriptKey: string, turnId: string) => `${transcriptKey}\n${turnId}`;

function remember(key: string, list: PinnedList): PinnedList {
  const shared = [...recentPins.values()].find((l) => l.hash === list.hash) ?? list;
  recentPins.delete(key);
  recentPins.set(key, shared);
  if (recentPins.size > RECENT_PINS) recentPins.delete(recentPins.keys().next().value!);
  return shared;
}

/**
 * The tool servers' tools a turn (or a delegate) is offered: read by the turn's first model call from what the
 * servers listed last, pinned under the list's content hash, and read back by every later step of the turn. Workflow
 * code never sees a server or a schema; a replay or a retry sees the list the first attempt saw. Denied tools are
 * not offered at all.
 */
export async function turnTools(
  pool: Pool,
  t: { agentId: string; transcriptKey: string; turnId: string; allowedServers: string[] | null },
  /** The turn's pin and the agent's servers, when the caller read them already (db/turn-call-reads.ts). */
  read?: { pinned?: PinnedList; servers: ToolServerRow[] },
): Promise<PinnedTool[]> {
  const key = pinKey(t.transcriptKey, t.turnId);
  const pinned = read
    ? read.pinned && remember(key, read.pinned)
    : await pinnedTurnTools(pool, t.transcriptKey, t.turnId);
  if (pinned) return pinned.tools;
  const servers = (read?.servers ?? (await listToolServers(pool, t.agentId))).filter(
    (s) => s.enabled && (t.allowedServers === null || t.allowedServers.includes(s.name)),
  );
  // An agent without tool servers pins nothing: its turns cost no more than before.
  if (servers.length === 0) return [];
  const tools = offeredServerTools(servers);
  const hash = createHash('sha256').update(canonicalJson(tools)).digest('hex');
  const list = await pinTools(pool, { transcriptKey: t.transcriptKey, turnId: t.turnId, hash, tools });
  return remember(key, list).tools;
}

/** The list pinned to the turn, if its first model call pinned one. */
export async function pinnedTurnTools(
  pool: Pool,
  transcriptKey: string,
  turnId: string,
): Promise<PinnedList | undefined> {
  const key = pinKey(transcriptKey, turnId);
  const known = recentPins.get(key);
  if (known) return known;
  const pinned = await pinnedTools(pool, transcriptKey, turnId);
  return pinned && remember(key, pinned);
}

/** The tools as the model reads them: its model-facing name, the server's description and input schema. */
export function serverToolDefinitions(tools: readonly PinnedTool[]): ToolDefinition[] {
  return tools.map((t) => ({
    name: t.modelName,
    description: t.description || t.annotations.title || t.name,
    input_schema: t.inputSchema,
  }));
}

/** The servers' tools as a turn is offered them: each under its policy, a denied one not at all. */
export function offeredServerTools(servers: readonly ToolServerRow[]): PinnedTool[] {
  return servers.flatMap((s) =>
    serverTools(s.name, s.tools, s)
      .filter((tool) => tool.policy !== 'deny')
      .map((tool) => ({ ...tool, server: s.name, serverVersion: s.version })),
  );
}
