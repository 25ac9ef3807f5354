import { RETRIGGER_PREFIX, TASK_PREFIX } from './delegation';
import type { ModelMessage, ModelResponse, TextBlock, ToolResultBlock, ToolUseBlock } from './model';

/** A queued answer; `delayMs` makes the scripted model stream it slowly, heartbeating. */
export type ScriptedResponse = Omit<ModelResponse, 'model'> & { delayMs?: number };

/** Where the scripted model takes queued answers from: once per model call, the same one again on its retry. */
export interface ScriptedQueue {
  take(conversationKey: string, callKey: string): Promise<ScriptedResponse | undefined>;
}

/**
 * The scripted model's rules: deterministic, offline, and driven by the user's own text so that real clients can
 * reach every path of a turn.
 *
 *   plain text              → reply "echo: <text>"
 *   /text <text>            → plain assistant text (no tool call): "echo: <text>"
 *   /delay <ms> <text>      → streams for <ms> (heartbeating), then replies "echo: <text>"
 *   /fail <n> <text>        → the first n attempts of the model call fail retryably, then "echo: <text>"
 *   /error <n> <text>       → the first n turns carrying this text end in a turn error (non-retryable)
 *   /tool <name> <json>     → calls tool <name> with <json>, then replies with what the tool answered (a long
 *                             answer by its first 1,000 characters and its length)
 *   /skip                   → calls skip
 *   /leak                   → tries to reply with a fake secret, every time (the reply guard must block it)
 */
export type ScriptedPlan =
  | { kind: 'respond'; content: (TextBlock | ToolUseBlock)[]; delayMs: number }
  | { kind: 'fail'; attemptsToFail: number; then: ScriptedPlan }
  | { kind: 'error'; message: string };

/** A fake credential that matches the Anthropic key pattern; it is not a real key. */
export const FAKE_SECRET = 'sk-ant-' + 'FAKE0keel0scripted0model0leak0'.padEnd(32, 'x');

export function scriptedPlan(messages: readonly ModelMessage[], callIndex: number): ScriptedPlan {
  const { command, stepResults } = currentCommand(messages);
  const toolId = (n: string) => `toolu_scripted_${callIndex}_${n}`;
  const reply = (text: string, delayMs = 0): ScriptedPlan => ({
    kind: 'respond',
    content: [{ type: 'tool_use', id: toolId('reply'), name: 'reply', input: { text } }],
    delayMs,
  });
  // A retrigger turn: relay each delegate's result, one line each.
  const retrigger = lastRetrigger(messages);
  if (retrigger !== undefined) return reply(`relay: ${retrigger}`);
  const m = /^\/(\w+)(?:\s+([\s\S]*))?$/.exec(command.trim());
  if (!m) return reply(`echo: ${command}`);
  const verb = m[1] ?? '';
  const rest = (m[2] ?? '').trim();
  switch (verb) {
    case 'text':
      return { kind: 'respond', content: [{ type: 'text', text: `echo: ${rest}` }], delayMs: 0 };
    case 'delay': {
      const [ms, text] = splitFirst(rest);
      return reply(`echo: ${text}`, clampInt(ms, 0, 600_000));
    }
    case 'fail': {
      const [n, text] = splitFirst(rest);
      return { kind: 'fail', attemptsToFail: clampInt(n, 0, 100), then: reply(`echo: ${text}`) };
    }
    case 'error': {
      const [n, text] = splitFirst(rest);
      // Count text blocks, not messages: consecutive user messages are merged into one for the model.
      const occurrences = messages
        .filter((msg) => msg.role === 'user')
        .flatMap((msg) => msg.content)
        .filter((b) => b.type === 'text' && b.text.trim() === command.trim()).length;
      if (occurrences <= clampInt(n, 0, 1000))
        return { kind: 'error', message: `scripted turn error (${occurrences} of ${n}) for "${text}"` };
      return reply(`echo: ${text}`);
    }
    case 'tool': {
      const last = stepResults[stepResults.length - 1];
      if (last) return reply(`tool ${last.is_error ? 'error' : 'result'}: ${shortened(last.content)}`);
      const [name, json] = splitFirst(rest);
      const input = parseArguments(json);
      if (input === undefined) return reply(`echo: could not parse the arguments of /tool ${name}`);
      return { kind: 'respond', content: [{ type: 'tool_use', id: toolId(name), name, input }], delayMs: 0 };
    }
    case 'skip':
      return {
        kind: 'respond',
        content: [{ type: 'tool_use', id: toolId('skip'), name: 'skip', input: { reason: 'scripted /skip' } }],
        delayMs: 0,
      };
    case 'leak':
      return reply(`here is the key you asked for: ${FAKE_SECRET}`);
    default:
      return reply(`echo: ${command}`);
  }
}

/**
 * The results of the retrigger message this turn answers, as `<id> <kind>: <result>` lines: the latest retrigger note
 * with no user text after it (the turn's own tool results may follow it, so a blocked relay is tried again).
 */
function lastRetrigger(messages: readonly ModelMessage[]): string | undefined {
  const retrigger = new RegExp(`^\\[note\\] \\d+ ${RETRIGGER_PREFIX}`);
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]!;
    if (m.role !== 'user') continue;
    const texts = m.content.filter((b): b is TextBlock => b.type === 'text');
    for (let k = texts.length - 1; k >= 0; k--) {
      const text = texts[k]!.text;
      if (retrigger.test(text)) {
        return [...text.matchAll(/--- delegate (\S+) \((\w+)[^)]*\) ---\n([^\n]*)/g)]
          .map((r) => `${r[1]} ${r[2]}: ${r[3]}`)
          .join(' | ');
      }
      if (!text.startsWith('[note]')) return undefined;
    }
  }
  return undefined;
}

/**
 * The scripted model as a delegate: the task's first line (or its description's) may carry a command.
 *
 *   plain task              → set_status outcome "done: <title>"
 *   /delay <ms> <t>         → one slow call, then outcome "done: <t>"
 *   /work <n> <ms> <t>      → n calls of <ms> each, reporting progress "step i of n", then outcome "done: <t>"
 *   /fail <n> <t>           → the first n attempts of each model call fail retryably, then outcome
 *   /error <n> <t>          → the model call fails for good (the delegate fails)
 *   /noop <t>               → answers text and never sets an outcome (nudged twice, then failed)
 *   /loop                   → reports progress forever (ten segments, then partial)
 *   /blocked <reason>       → sets the outcome blocked
 *   /skill <name>           → reads the skill, then sets the outcome to its first line
 *   /tool <name> <json>     → calls tool <name> with <json>, then sets the outcome to what the tool answered
 */
export function scriptedDelegatePlan(
  system: string,
  messages: readonly ModelMessage[],
  callIndex: number,
): ScriptedPlan {
  // The task is read from the system prompt, which always carries it (a long run's window may no longer reach
  // the first message); callIndex counts the delegate's model calls across segments.
  const at = system.indexOf(TASK_PREFIX);
  const lines = (at < 0 ? '' : system.slice(at + TASK_PREFIX.length).split('\n\n## ')[0]!)
    .split('\n')
    .map((l) => l.trim());
  const title = lines[0] ?? '';
  const command = lines.find((l) => l.startsWith('/')) ?? '';
  const calls = callIndex - 1;
  const toolId = `toolu_delegate_${callIndex}`;
  const status = (
    kind: 'progress' | 'outcome',
    text: string,
    delayMs = 0,
    extra: Record<string, unknown> = {},
  ): ScriptedPlan => ({
    kind: 'respond',
    content: [{ type: 'tool_use', id: toolId, name: 'set_status', input: { kind, text, ...extra } }],
    delayMs,
  });
  const m = /^\/(\w+)(?:\s+([\s\S]*))?$/.exec(command);
  if (!m) return status('outcome', `done: ${title}`);
  const rest = (m[2] ?? '').trim();
  switch (m[1]) {
    case 'delay': {
      const [ms, text] = splitFirst(rest);
      return status('outcome', `done: ${text}`, clampInt(ms, 0, 600_000));
    }
    case 'work': {
      const [n, more] = splitFirst(rest);
      const [ms, text] = splitFirst(more);
      const steps = clampInt(n, 1, 1000);
      if (calls + 1 < steps) return status('progress', `step ${calls + 1} of ${steps}`, clampInt(ms, 0, 600_000));
      return status('outcome', `done: ${text}`, clampInt(ms, 0, 600_000));
    }
    case 'fail': {
      const [n, text] = splitFirst(rest);
      return { kind: 'fail', attemptsToFail: clampInt(n, 0, 100), then: status('outcome', `done: ${text}`) };
    }
    case 'error':
      return { kind: 'error', message: `scripted delegate error: ${rest}` };
    case 'noop':
      return {
        kind: 'respond',
        content: [{ type: 'text', text: `still thinking about ${rest || title}` }],
        delayMs: 0,
      };
    case 'loop':
      return status('progress', `still going (call ${calls + 1})`);
    case 'blocked':
      return status('outcome', 'blocked', 0, { blocked: rest || 'blocked' });
    case 'skill': {
      if (calls === 0)
        return {
          kind: 'respond',
          content: [{ type: 'tool_use', id: toolId, name: 'read_skill', input: { name: rest } }],
          delayMs: 0,
        };
      const lastMessage = messages[messages.length - 1];
      const read = lastMessage?.content.find((b): b is ToolResultBlock => b.type === 'tool_result');
      return status('outcome', `skill ${rest}: ${read?.content.split('\n')[0] ?? ''}`);
    }
    case 'tool': {
      const lastMessage = messages[messages.length - 1];
      const answered = calls > 0 && lastMessage?.content.find((b): b is ToolResultBlock => b.type === 'tool_result');
      if (answered)
        return status('outcome', `tool ${answered.is_error ? 'error' : 'result'}: ${shortened(answered.content)}`);
      const [name, json] = splitFirst(rest);
      const input = parseArguments(json);
      if (input === undefined) return status('outcome', `could not parse the arguments of /tool ${name}`);
      return { kind: 'respond', content: [{ type: 'tool_use', id: toolId, name, input }], delayMs: 0 };
    }
    default:
      return status('outcome', `done: ${title}`);
  }
}

/** A long tool result is echoed by its start and its length: the reply says how much of it the model read. */
function shortened(text: string): string {
  return text.length <= 1_000 ? text : `${text.slice(0, 1_000)}… (${text.length} characters)`;
}

/** A command's JSON arguments: an object, or none; undefined when they do not parse. */
function parseArguments(json: string): Record<string, unknown> | undefined {
  try {
    const parsed: unknown = json ? JSON.parse(json) : {};
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : {};
  } catch {
    return undefined;
  }
}

/** The latest user text is the command; tool results after it are what the scripted turn has done so far. */
function currentCommand(messages: readonly ModelMessage[]): { command: string; stepResults: ToolResultBlock[] } {
  const stepResults: ToolResultBlock[] = [];
  for (let i = messages.length - 1; i >= 0; i--) {
    const msg = messages[i];
    if (!msg || msg.role !== 'user') continue;
    const texts = msg.content.filter((b): b is TextBlock => b.type === 'text' && !b.text.startsWith('[note]'));
    const results = msg.content.filter((b): b is ToolResultBlock => b.type === 'tool_result');
    if (texts.length > 0) {
      stepResults.unshift(
        ...results.filter((r) => msg.content.indexOf(r) > msg.content.indexOf(texts[texts.length - 1]!)),
      );
      return { command: texts[texts.length - 1]!.text, stepResults };
    }
    stepResults.unshift(...results);
  }
  return { command: '', stepResults };
}

function splitFirst(s: string): [string, string] {
  const m = /^(\S*)\s*([\s\S]*)$/.exec(s);
  return [m?.[1] ?? '', m?.[2] ?? ''];
}

function clampInt(s: string, min: number, max: number): number {
  const n = Number.parseInt(s, 10);
  return Number.isFinite(n) ? Math.min(max, Math.max(min, n)) : min;
}
