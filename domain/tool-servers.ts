/**
 * Tool servers: MCP servers a person configures for an agent, and the rules over their tools that do not depend on
 * how Keel talks to them. Pure: no MCP client here, and nothing a workflow needs beyond the types.
 */

/** A tool server's name: part of every model-facing tool name (`<server>__<tool>`). */
export const TOOL_SERVER_NAME = /^[a-z0-9-]{1,32}$/;
export const TOOL_SERVER_NAME_RULE = 'a tool server name is 1 to 32 lowercase letters, digits or hyphens';

/** What happens when the model calls a tool: it runs, it waits for a person, or the model never sees it. */
export type ToolPolicy = 'auto' | 'approve' | 'deny';
export const TOOL_POLICIES: readonly ToolPolicy[] = ['auto', 'approve', 'deny'];

/** MCP's tool annotations: hints from a server Keel does not trust, used only for defaults. */
export interface ToolAnnotations {
  title?: string;
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

/** A tool as its server lists it. */
export interface ListedTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  annotations: ToolAnnotations;
}

/** A tool as Keel offers it: its server's listing, its model-facing name and the policy in force. */
export interface ServerTool extends ListedTool {
  modelName: string;
  policy: ToolPolicy;
}

/** A person's policies for one server's tools. */
export interface ToolPolicies {
  policies: Record<string, ToolPolicy>;
  /** Applies to every tool without a policy of its own; the annotations decide when unset. */
  defaultPolicy: ToolPolicy | null;
}

/** The separator between server and tool in the name the model calls. */
export const MODEL_NAME_SEPARATOR = '__';

/**
 * The name the model calls a server's tool by. Anthropic's tool names allow letters, digits, `_` and `-` (at most 64
 * characters), so anything else in the tool's own name becomes `_`.
 */
export function modelToolName(server: string, tool: string): string {
  return `${server}${MODEL_NAME_SEPARATOR}${tool.replace(/[^A-Za-z0-9_-]/g, '_')}`.slice(0, 64);
}

/** Whether a name the model called is a server's tool rather than one of Keel's own. */
export function isServerToolName(name: string): boolean {
  return name.includes(MODEL_NAME_SEPARATOR);
}

/** The server and tool of a model-facing name, when it is one Keel would give a server's tool (`<server>__<tool>`). */
export function serverToolOf(modelName: string): { server: string; name: string } | undefined {
  const at = modelName.indexOf(MODEL_NAME_SEPARATOR);
  const server = modelName.slice(0, at);
  const name = modelName.slice(at + MODEL_NAME_SEPARATOR.length);
  const named = at > 0 && name !== '' && TOOL_SERVER_NAME.test(server) && modelToolName(server, name) === modelName;
  return named ? { server, name } : undefined;
}

/**
 * The policy in force: a person's policy for the tool, else their default for the server, else the annotations'
 * default: read-only tools run at once, anything that may change the world waits for a person.
 */
export function effectivePolicy(tool: Pick<ListedTool, 'name' | 'annotations'>, p: ToolPolicies): ToolPolicy {
  return p.policies[tool.name] ?? p.defaultPolicy ?? (tool.annotations.readOnlyHint === true ? 'auto' : 'approve');
}

/** A call that may be sent again when its outcome is unknown: the server says it changes nothing, or nothing twice. */
export function retriesSafely(annotations: ToolAnnotations): boolean {
  return annotations.readOnlyHint === true || annotations.idempotentHint === true;
}

/** The server's tools as Keel offers them, each with its model name and policy. */
export function serverTools(server: string, listed: readonly ListedTool[], p: ToolPolicies): ServerTool[] {
  return listed.map((t) => ({ ...t, modelName: modelToolName(server, t.name), policy: effectivePolicy(t, p) }));
}

/** Policies that name a tool the server does not list: a typo a person should hear about. */
export function unknownPolicyTools(listed: readonly ListedTool[], p: ToolPolicies): string[] {
  const names = new Set(listed.map((t) => t.name));
  return Object.keys(p.policies).filter((n) => !names.has(n));
}

/** A tool as a turn was offered it: pinned with its server's name and the version of its configuration. */
export interface PinnedTool extends ServerTool {
  server: string;
  serverVersion: number;
}

/** The commands a stdio tool server may run unless KEEL_TOOL_COMMANDS says otherwise: how MCP servers ship. */
export const DEFAULT_TOOL_COMMANDS: readonly string[] = ['npx', 'uvx', 'node', 'python3'];

/** Which commands a stdio server may run: a list of exact commands, or any (`*`). */
export type ToolCommands = readonly string[] | '*';

export function commandAllowed(command: string, allowed: ToolCommands): boolean {
  return allowed === '*' || allowed.includes(command);
}
