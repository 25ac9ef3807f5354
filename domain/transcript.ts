import type { DeliveryOutcome } from './delivery';
import type { ContentBlock, ModelMessage, TextBlock, ToolResultBlock, ToolUseBlock } from './model';

/** Roles as the API shows them. `tool` rows carry tool results; `system` rows carry Keel's own notes. */
export type TranscriptRole = 'user' | 'assistant' | 'system' | 'tool';

export interface TranscriptMessage {
  seq: number;
  role: TranscriptRole;
  content: ContentBlock[];
}

/**
 * The transcript as the model reads it: tool results and notes travel as user content, and consecutive
 * messages of one role are merged, because the Messages API alternates user and assistant.
 */
export function toModelMessages(rows: readonly TranscriptMessage[]): ModelMessage[] {
  const out: ModelMessage[] = [];
  for (const row of rows) {
    const role = row.role === 'assistant' ? 'assistant' : 'user';
    const content: ContentBlock[] =
      row.role === 'system'
        ? row.content.map((b) => (b.type === 'text' ? { type: 'text', text: `[note] ${b.text}` } : b))
        : row.content;
    if (content.length === 0) continue;
    const last = out[out.length - 1];
    if (last && last.role === role) last.content = [...last.content, ...content];
    else out.push({ role, content: [...content] });
  }
  return out;
}

export function textOf(content: readonly ContentBlock[]): string {
  return content
    .filter((b): b is TextBlock => b.type === 'text')
    .map((b) => b.text)
    .join('');
}

export function toolUses(content: readonly ContentBlock[]): ToolUseBlock[] {
  return content.filter((b): b is ToolUseBlock => b.type === 'tool_use');
}

/** A tool's result as the model reads it; `ref` names the whole result Keel keeps when this is its preview. */
export function toolResult(toolUseId: string, content: string, isError = false, ref?: string): ToolResultBlock {
  return {
    type: 'tool_result',
    tool_use_id: toolUseId,
    content,
    ...(isError ? { is_error: true } : {}),
    ...(ref ? { ref } : {}),
  };
}

/** What the model reads back of its reply: the delivery's outcome. */
export function replyResult(toolUseId: string, outcome: DeliveryOutcome): ToolResultBlock {
  return toolResult(toolUseId, `reply ${outcome}`);
}

/**
 * A copy of a transcript ends where it is valid: an assistant message whose tool calls have no results yet (the
 * model call that is spawning a delegate, say) is dropped, since the Messages API refuses an unanswered tool call.
 */
export function withoutUnansweredToolCalls(rows: readonly TranscriptMessage[]): TranscriptMessage[] {
  let end = rows.length;
  while (end > 0 && rows[end - 1]!.role === 'assistant' && rows[end - 1]!.content.some((b) => b.type === 'tool_use'))
    end--;
  return rows.slice(0, end);
}

/** How many of the latest transcript messages a model call reads. */
export const TRANSCRIPT_WINDOW = 200;

/**
 * The window never starts on an orphaned tool result or a lone assistant message: the Messages API needs the
 * first message to be the user's, and a tool result needs the tool call before it.
 */
export function trimWindowStart(rows: readonly TranscriptMessage[]): TranscriptMessage[] {
  let start = 0;
  while (start < rows.length && (rows[start]!.role === 'assistant' || rows[start]!.role === 'tool')) start++;
  return rows.slice(start);
}
