import { z } from 'zod';
import { DESTINATION_NAME, DESTINATION_NAME_RULE, MODEL_TARGET_REFUSED } from './delivery';
import { JobSchedule } from './jobs';
import type { ModelStep, ToolDefinition, ToolInputErrors } from './model';
import { isServerToolName } from './tool-servers';
import { TOOL, unknownTool } from './tool-names';
export { CHANNEL_TOOL_NAMES, DELEGATE_TOOL_NAMES } from './tool-names';

/**
 * The tool registry's contract: each tool has a name, a description the model reads and a zod schema of its
 * input. The registry is open: later capabilities (delegation, schedules) register their tools here and their
 * handlers in the conversation workflow's dispatch table.
 */
export interface ToolSpec<S extends z.ZodType = z.ZodType> {
  name: string;
  description: string;
  input: S;
  /** A tool that ends the channel turn when it succeeds (reply, skip). */
  endsTurn: boolean;
}

export function defineTool<S extends z.ZodType>(spec: ToolSpec<S>): ToolSpec<S> {
  return spec;
}

export const replyTool = defineTool({
  name: TOOL.reply,
  description:
    'Send a message to the user. This is how the user hears from you: plain text you write outside this tool is ' +
    'also delivered, but only when you call no tool. Calling reply ends your turn.',
  input: z.object({ text: z.string().min(1).describe('The message the user will read.') }),
  endsTurn: true,
});

export const skipTool = defineTool({
  name: TOOL.skip,
  description: 'End your turn without replying, when the message needs no answer.',
  input: z.object({ reason: z.string().optional().describe('Why no reply is needed (kept in the transcript).') }),
  endsTurn: true,
});

export const spawnDelegateTool = defineTool({
  name: TOOL.spawnDelegate,
  description:
    'Hand a task to a delegate that works on it in the background; its result comes back to you later in this ' +
    'conversation. Give either `task` (the number of a task on the board) or `text` (an ad-hoc task). The delegate ' +
    'does not see this conversation unless historyMode is "fork".',
  input: z
    .object({
      task: z.number().int().positive().max(2_147_483_647).optional().describe('The number of a ready task.'),
      text: z.string().min(1).max(32_768).optional().describe('An ad-hoc task, self-contained.'),
      historyMode: z.enum(['clean', 'fork']).optional(),
    })
    .refine((v) => (v.task === undefined) !== (v.text === undefined), 'give exactly one of task or text'),
  endsTurn: false,
});

export const cancelDelegateTool = defineTool({
  name: TOOL.cancelDelegate,
  description: 'Stop a running delegate; the reason is kept in its outcome.',
  input: z.object({ delegateId: z.string().min(1), reason: z.string().min(1).max(1000) }),
  endsTurn: false,
});

export const setStatusTool = defineTool({
  name: TOOL.setStatus,
  description:
    'Report on your task. kind "progress": how far you are (keep working afterwards). kind "outcome": the final ' +
    'result, only when every step is done; set blocked to a reason instead if you cannot go on.',
  input: z.object({
    kind: z.enum(['progress', 'outcome']),
    text: z.string().min(1),
    blocked: z.string().min(1).optional(),
  }),
  endsTurn: false,
});

export const readSkillTool = defineTool({
  name: TOOL.readSkill,
  description: 'Read the full body of a skill from the skills index.',
  input: z.object({ name: z.string().min(1) }),
  endsTurn: false,
});

export const taskUpdateTool = defineTool({
  name: TOOL.taskUpdate,
  description: "Update your task's description on the board (for example with what remains to be done).",
  input: z.object({ description: z.string().min(1).max(32_768) }),
  endsTurn: false,
});

export const addTaskCommentTool = defineTool({
  name: TOOL.addTaskComment,
  description: 'Add a comment to your task on the board.',
  input: z.object({ body: z.string().min(1).max(8_000) }),
  endsTurn: false,
});

export const scheduleTool = defineTool({
  name: TOOL.schedule,
  description:
    'Manage scheduled jobs. action "create" needs name, schedule ({kind:"at",at} | {kind:"every",intervalMs} | ' +
    '{kind:"cron",expr,tz?}) and task; "list" lists them; "delete", "run", "pause" and "resume" take jobId or name. ' +
    'Write the task self-contained: the run happens in a conversation of its own and will not see this one. ' +
    'Results go to delivery, the name of a destination the owner configured ("owner" is the owner); without it ' +
    'they stay readable in Keel. Delivery never takes a URL or a Slack target.',
  input: z.object({
    action: z.enum(['create', 'list', 'delete', 'run', 'pause', 'resume']),
    jobId: z.string().optional(),
    name: z.string().optional(),
    description: z.string().optional(),
    schedule: JobSchedule.optional(),
    task: z.string().optional(),
    /** A name only: where results go is a person's choice, so a URL in the model's hands is refused here. */
    delivery: z
      .string({ error: MODEL_TARGET_REFUSED })
      .regex(DESTINATION_NAME, `${DESTINATION_NAME_RULE}: ${MODEL_TARGET_REFUSED}`)
      .optional()
      .describe('The name of a destination configured for this agent, e.g. "ops-webhook" or "owner".'),
    deleteAfterRun: z.boolean().optional(),
  }),
  endsTurn: false,
});

const registry = new Map<string, ToolSpec>();

export function registerTool(spec: ToolSpec): void {
  if (registry.has(spec.name)) throw new Error(`tool ${spec.name} is registered twice`);
  registry.set(spec.name, spec);
}

export function toolSpec(name: string): ToolSpec | undefined {
  return registry.get(name);
}

for (const tool of [
  replyTool,
  skipTool,
  spawnDelegateTool,
  cancelDelegateTool,
  scheduleTool,
  setStatusTool,
  readSkillTool,
  taskUpdateTool,
  addTaskCommentTool,
])
  registerTool(tool);

/**
 * A model's tool call checked against the tools it was offered and the tool's schema; the error is what the model
 * reads in the tool result. Channel and delegate tools alike go through here.
 */
export function parseToolCall(
  call: { name: string; input: unknown },
  offered: readonly string[],
): { ok: true; input: unknown } | { ok: false; error: string } {
  const spec = registry.get(call.name);
  if (!spec || !offered.includes(call.name)) return { ok: false, error: unknownTool(call.name) };
  const parsed = spec.input.safeParse(call.input);
  if (parsed.success) return { ok: true, input: parsed.data };
  const issue = parsed.error.issues[0];
  return {
    ok: false,
    error:
      `invalid arguments for ${call.name}: ` +
      (issue ? `${issue.path.join('.') || 'input'}: ${issue.message}` : 'invalid'),
  };
}

/**
 * An answer's calls of Keel's own tools checked against the tools offered, in the model step that commits it, so
 * that the workflow holds no schema (issue 27): their inputs as parsed, and the error of each that does not fit. A
 * tool server's calls are checked by their own step.
 */
export function checkToolCalls(
  content: ModelStep['content'],
  offered: readonly string[],
): Pick<ModelStep, 'content' | 'inputErrors'> {
  const inputErrors: ToolInputErrors = {};
  const checked = content.map((block) => {
    if (block.type !== 'tool_use' || isServerToolName(block.name)) return block;
    const parsed = parseToolCall(block, offered);
    // Every tool's schema is an object's.
    if (parsed.ok) return { ...block, input: parsed.input as Record<string, unknown> };
    inputErrors[block.id] = parsed.error;
    return block;
  });
  return { content: checked, inputErrors };
}

/** Each tool's definition, made once: a model call would otherwise convert its zod schema again every time. */
const definitions = new Map<string, ToolDefinition>();

/** Anthropic tool definitions for the named tools; unknown names are a programming error. */
export function toolDefinitions(names: readonly string[]): ToolDefinition[] {
  return names.map((name) => {
    const made = definitions.get(name);
    if (made) return made;
    const spec = registry.get(name);
    if (!spec) throw new Error(`unknown tool ${name}`);
    const schema = z.toJSONSchema(spec.input) as Record<string, unknown>;
    delete schema.$schema;
    const definition = { name: spec.name, description: spec.description, input_schema: schema };
    definitions.set(name, definition);
    return definition;
  });
}
