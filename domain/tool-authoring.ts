import type { AppDefinition } from './apps';
import type { ModelMessage } from './model';
import { parseAuthoredTool } from './routines';

/**
 * What the model is told when it authors a routine's tool, and what the `ai.*` capabilities ask of it. The system
 * prompts open with a marker line so that the scripted model (and a reader of a request log) knows which is which.
 */
export const AUTHORING_MARKER = '[keel:author-tool]';
export const AI_MARKERS = {
  score: '[keel:ai.score]',
  summarize: '[keel:ai.summarize]',
  write: '[keel:ai.write]',
} as const;
export type AiCapability = keyof typeof AI_MARKERS;

/** The capabilities with their argument shapes, as the authoring model reads them. */
export const CAPABILITY_DOCS = [
  "data.list(table) → array of records (objects with an id and the table's columns)",
  'data.get(table, id) → the record, or null',
  'data.upsert(table, record) → the saved record (record.id chooses the row; a new id creates one)',
  'ai.score(text, rubric) → a number from 0 to 100',
  'ai.summarize(text) → a short summary (string)',
  'ai.write(instruction) → a drafted text (string)',
  'integrations.call(name, payload) → the integration\'s JSON answer (throws "not connected" when there is none)',
  "send(text, destination?) → delivers text to the routine's delivery, or to a destination the owner configured, " +
    "by name (never a URL); waits for a human's approval first",
  'browser(instruction) → not available on this deployment (throws)',
];

export const AUTHORING_SYSTEM = [
  AUTHORING_MARKER,
  'You author one small JavaScript tool for a scheduled routine. Answer with exactly one JSON object:',
  '{"name": "camelCaseName", "title": "Short Title", "purpose": "one sentence", "inputs": ["input"], ' +
    '"code": "async function camelCaseName({ input }) { … }"}',
  'Rules: `code` defines an async function called `name`, ' +
    'which receives one object of string arguments named by `inputs`',
  '(a routine passes its prompt as `input`). Call only these capabilities, always with await:',
  ...CAPABILITY_DOCS.map((d) => `- ${d}`),
  'There is no require, import, process, fetch, timers or clock you can trust. Draft before you send. Return a',
  "structured object or a short string: it becomes the run's digest.",
].join('\n');

function schemaLines(tables: AppDefinition['tables']): string {
  return tables.length
    ? tables.map((t) => `- ${t.name}(${['id', ...t.columns].join(', ')})`).join('\n')
    : '- (no tables)';
}

/** The authoring request: the prompt and the app's table schema (the capabilities are in the system prompt). */
export function authoringMessage(prompt: string, tables: AppDefinition['tables']): string {
  return `Routine prompt:\n${prompt}\n\nThe app's tables:\n${schemaLines(tables)}`;
}

/** The one repair request: the original request, the tool that failed and why. */
export function repairMessage(prompt: string, tables: AppDefinition['tables'], failure: string): string {
  return (
    `${authoringMessage(prompt, tables)}\n\nYour previous attempt crashed on a smoke run with: ${failure}\n` +
    'Fix the code (respect the documented capability shapes) and output the corrected tool.'
  );
}

export const AI_SYSTEM: Record<AiCapability, string> = {
  score:
    `${AI_MARKERS.score}\nScore the text against the rubric. ` +
    'Answer with a single integer from 0 to 100 and nothing else.',
  summarize: `${AI_MARKERS.summarize}\nSummarise the text in at most three sentences.`,
  write: `${AI_MARKERS.write}\nWrite the text the instruction asks for. Answer with the text only.`,
};

export function aiMessage(kind: AiCapability, args: readonly unknown[]): string {
  const [first, second] = args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a ?? '')));
  if (kind === 'score') return `Rubric: ${second ?? ''}\n\nText:\n${first ?? ''}`;
  return first ?? '';
}

/** The model's score as a number in 0–100, or undefined when it gave none. */
export function parseScore(reply: string): number | undefined {
  const m = /-?\d+(?:\.\d+)?/.exec(reply);
  if (!m) return undefined;
  return Math.max(0, Math.min(100, Math.round(Number(m[0]))));
}

// ---- the scripted model's answers ---------------------------------------------------------------------------------

/** The balanced JSON object that follows `marker` in text, as text. */
function jsonAfter(text: string, marker: string): string | undefined {
  const at = text.lastIndexOf(marker);
  if (at < 0) return undefined;
  const parsed = parseAuthoredTool(text.slice(at + marker.length));
  return parsed.ok ? JSON.stringify(parsed.tool) : text.slice(at + marker.length).trim();
}

/**
 * The scripted model as an author: the tool JSON after `/author ` in the routine's prompt; for a repair, the JSON
 * after `/repair ` (or the same tool again when there is none). No `/author`: an answer without a tool.
 */
export function scriptedAuthoring(messages: readonly ModelMessage[]): string {
  const text = messages
    .filter((m) => m.role === 'user')
    .flatMap((m) => m.content)
    .map((b) => (b.type === 'text' ? b.text : ''))
    .join('\n');
  const prompt = text.split("\n\nThe app's tables:")[0] ?? text;
  const repairing = text.includes('Your previous attempt crashed');
  const authored = jsonAfter(prompt.split('/repair ')[0] ?? prompt, '/author ');
  if (repairing) return jsonAfter(prompt, '/repair ') ?? authored ?? 'The scripted model has no tool to repair.';
  return authored ?? "The scripted model authors a tool only from `/author {json}` in the routine's prompt.";
}

/** Deterministic answers for `ai.*`: a score from the text's letters, a summary and a draft that quote it. */
export function scriptedAi(kind: AiCapability, message: string): string {
  if (kind === 'score') {
    let h = 0;
    for (const ch of message) h = (h * 31 + ch.charCodeAt(0)) % 101;
    return String(h);
  }
  const body = message.replace(/\s+/g, ' ').trim().slice(0, 200);
  return kind === 'summarize' ? `summary: ${body}` : `draft: ${body}`;
}

/** The scripted model's answer to an authoring or `ai.*` request, or undefined for any other request. */
export function scriptedRoutineAnswer(system: string, messages: readonly ModelMessage[]): string | undefined {
  if (system.startsWith(AUTHORING_MARKER)) return scriptedAuthoring(messages);
  for (const kind of Object.keys(AI_MARKERS) as AiCapability[]) {
    if (system.startsWith(AI_MARKERS[kind])) {
      const text = messages
        .flatMap((m) => m.content)
        .map((b) => (b.type === 'text' ? b.text : ''))
        .join('\n');
      return scriptedAi(kind, text);
    }
  }
  return undefined;
}
