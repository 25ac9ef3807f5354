import { z } from 'zod';
import type { ToolDefinition } from './model';

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
  name: 'reply',
  description:
    'Send a message to the user. This is how the user hears from you: plain text you write outside this tool is ' +
    'also delivered, but only when you call no tool. Calling reply ends your turn.',
  input: z.object({ text: z.string().min(1).describe('The message the user will read.') }),
  endsTurn: true,
});

export const skipTool = defineTool({
  name: 'skip',
  description: 'End your turn without replying, when the message needs no answer.',
  input: z.object({ reason: z.string().optional().describe('Why no reply is needed (kept in the transcript).') }),
  endsTurn: true,
});

const registry = new Map<string, ToolSpec>();

export function registerTool(spec: ToolSpec): void {
  if (registry.has(spec.name)) throw new Error(`tool ${spec.name} is registered twice`);
  registry.set(spec.name, spec);
}

export function toolSpec(name: string): ToolSpec | undefined {
  return registry.get(name);
}

registerTool(replyTool);
registerTool(skipTool);

/** The tools a channel turn offers the model. Later issues append to this list. */
export const CHANNEL_TOOL_NAMES: string[] = [replyTool.name, skipTool.name];

/** Anthropic tool definitions for the named tools; unknown names are a programming error. */
export function toolDefinitions(names: readonly string[]): ToolDefinition[] {
  return names.map((name) => {
    const spec = registry.get(name);
    if (!spec) throw new Error(`unknown tool ${name}`);
    const schema = z.toJSONSchema(spec.input) as Record<string, unknown>;
    delete schema.$schema;
    return { name: spec.name, description: spec.description, input_schema: schema };
  });
}
