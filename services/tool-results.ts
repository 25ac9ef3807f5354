import type { Pool } from '../db/pool';
import * as calls from '../db/tool-calls';
import type { ContentBlock, ModelMessage, ToolUseBlock } from '../domain/model';
import { redactSecrets } from '../domain/secret-scan';
import { TOOL_CALLS } from '../domain/tool-calls';

/**
 * Tool calls' results as people and the model read them: whole for the model (up to its budget) where the history
 * keeps a reference, and beside each tool call of a transcript page for people.
 */

/**
 * Messages for the model with every result kept by reference read whole, up to the model's budget for one result;
 * where a result is cut, the model reads a notice saying so.
 */
export async function withWholeResults(pool: Pool, messages: ModelMessage[]): Promise<ModelMessage[]> {
  const refs = messages.flatMap((m) => m.content.flatMap((b) => (b.type === 'tool_result' && b.ref ? [b.ref] : [])));
  if (refs.length === 0) return messages;
  const byId = new Map((await calls.toolCallsByIds(pool, refs)).map((r) => [r.id, r]));
  return messages.map((m) => ({
    ...m,
    content: m.content.map((b) => {
      if (b.type !== 'tool_result' || !b.ref) return b;
      const { ref, ...block } = b;
      const whole = byId.get(ref)?.result;
      if (whole == null) return block;
      const cut = whole.length > TOOL_CALLS.modelResultChars;
      const text = cut
        ? `${whole.slice(0, TOOL_CALLS.modelResultChars)}\n[cut: this result is ${whole.length} characters; ` +
          `the first ${TOOL_CALLS.modelResultChars} are shown]`
        : whole;
      return { ...block, content: text };
    }),
  }));
}

/** A tool call as a transcript shows it: what was asked, what came back, and for a server's tool its record. */
export interface TranscriptToolCall {
  toolUseId: string;
  /** The name the model called (a server's tool as `<server>__<tool>`); null when its step is not on this page. */
  name: string | null;
  arguments: Record<string, unknown> | null;
  result: string;
  isError: boolean;
  server?: Pick<
    calls.ToolCallRow,
    'id' | 'server' | 'tool' | 'policy' | 'status' | 'decidedBy' | 'note' | 'durationMs'
  >;
}

/**
 * The tool calls each `tool` row of a transcript page answers: the name and arguments from the model step that asked
 * (on the page, or the call's record), the result as the transcript keeps it, and a server tool's record beside it.
 */
export async function transcriptToolCalls<R extends { role: string; turnId: string | null; content: ContentBlock[] }>(
  pool: Pool,
  transcriptKey: string,
  rows: readonly R[],
): Promise<(R & { toolCalls?: TranscriptToolCall[] })[]> {
  const turnIds = [...new Set(rows.flatMap((r) => (r.role === 'tool' && r.turnId ? [r.turnId] : [])))];
  if (turnIds.length === 0) return [...rows];
  const key = (turnId: string | null, toolUseId: string) => `${turnId}\u0000${toolUseId}`;
  const asked = new Map<string, ToolUseBlock>();
  for (const r of rows) for (const b of r.content) if (b.type === 'tool_use') asked.set(key(r.turnId, b.id), b);
  const records = new Map(
    (await calls.toolCallsOfTurns(pool, transcriptKey, turnIds)).map((c) => [key(c.turnId, c.toolUseId), c]),
  );
  return rows.map((r) => {
    if (r.role !== 'tool') return r;
    const toolCalls = r.content.flatMap((b): TranscriptToolCall[] => {
      if (b.type !== 'tool_result') return [];
      const use = asked.get(key(r.turnId, b.tool_use_id));
      const record = records.get(key(r.turnId, b.tool_use_id));
      return [
        {
          toolUseId: b.tool_use_id,
          name: use?.name ?? record?.modelName ?? null,
          // What the model wrote may hold a secret (a reply the guard blocked, say): shown through the scanner.
          arguments: redactedArguments(use?.input ?? record?.arguments ?? null),
          result: b.content,
          isError: b.is_error === true,
          ...(record
            ? {
                server: {
                  id: record.id,
                  server: record.server,
                  tool: record.tool,
                  policy: record.policy,
                  status: record.status,
                  decidedBy: record.decidedBy,
                  note: record.note,
                  durationMs: record.durationMs,
                },
              }
            : {}),
        },
      ];
    });
    return { ...r, toolCalls };
  });
}

/** Arguments with every string passed through the secret scanner, as a transcript shows them. */
function redactedArguments(args: Record<string, unknown> | null): Record<string, unknown> | null {
  const redact = (v: unknown): unknown =>
    typeof v === 'string'
      ? redactSecrets(v).text
      : Array.isArray(v)
        ? v.map(redact)
        : v && typeof v === 'object'
          ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, redact(x)]))
          : v;
  return args && (redact(args) as Record<string, unknown>);
}
