import { expect } from 'vitest';
import type { ToolUseBlock } from '../../domain/model';
import type { ScriptedPlan } from '../../domain/scripted-model';

export type Respond = Extract<ScriptedPlan, { kind: 'respond' }>;

/** The plan, which must be an answer (not a failure). */
export function respond(plan: ScriptedPlan): Respond {
  if (plan.kind !== 'respond') throw new Error(`expected a respond plan, got ${JSON.stringify(plan)}`);
  return plan;
}

/** The plan's single tool call. */
export function onlyToolUse(plan: ScriptedPlan): ToolUseBlock {
  const content = respond(plan).content;
  expect(content).toHaveLength(1);
  const block = content[0];
  if (block?.type !== 'tool_use') throw new Error(`expected a tool_use block, got ${JSON.stringify(block)}`);
  return block;
}
