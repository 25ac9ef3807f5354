/**
 * The names of Keel's own tools, and which a channel turn and a delegate offer the model. Free of schemas, so that
 * the workflow bundle holds none (issue 27): each tool's description and input schema are in tools.ts.
 */
export const TOOL = {
  reply: 'reply',
  skip: 'skip',
  spawnDelegate: 'spawn_delegate',
  cancelDelegate: 'cancel_delegate',
  schedule: 'schedule',
  setStatus: 'set_status',
  readSkill: 'read_skill',
  taskUpdate: 'task_update',
  addTaskComment: 'add_task_comment',
} as const;

/** The tools a channel turn offers the model. Later issues append to this list. */
export const CHANNEL_TOOL_NAMES: string[] = [
  TOOL.reply,
  TOOL.skip,
  TOOL.spawnDelegate,
  TOOL.cancelDelegate,
  TOOL.schedule,
];

/** The tools a delegate works with (task_update and add_task_comment act on its own task only). */
export const DELEGATE_TOOL_NAMES: string[] = [TOOL.setStatus, TOOL.readSkill, TOOL.taskUpdate, TOOL.addTaskComment];

/** What the model reads when it calls a tool it was not offered. */
export const unknownTool = (name: string) => `unknown tool "${name}"`;
