import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { modelToolName } from '../../domain/tool-servers';
import {
  CHANNEL_TOOL_NAMES,
  checkToolCalls,
  defineTool,
  registerTool,
  replyTool,
  skipTool,
  toolDefinitions,
  toolSpec,
} from '../../domain/tools';

describe('toolDefinitions', () => {
  it('gives Anthropic-shaped definitions for the channel tools, in order', () => {
    const defs = toolDefinitions(CHANNEL_TOOL_NAMES);
    expect(defs.map((d) => d.name)).toEqual(['reply', 'skip', 'spawn_delegate', 'cancel_delegate', 'schedule']);
    for (const d of defs) {
      expect(Object.keys(d).sort()).toEqual(['description', 'input_schema', 'name']);
      expect(d.description.length).toBeGreaterThan(0);
      expect(d.input_schema.type).toBe('object');
      expect(d.input_schema).not.toHaveProperty('$schema');
    }
  });

  it('describes the reply tool input: a required, non-empty text', () => {
    const [reply] = toolDefinitions(['reply']);
    expect(reply?.description).toBe(replyTool.description);
    expect(reply?.input_schema).toMatchObject({
      type: 'object',
      properties: { text: { type: 'string', minLength: 1, description: 'The message the user will read.' } },
      required: ['text'],
    });
  });

  it('describes the skip tool input: an optional reason', () => {
    const [skip] = toolDefinitions(['skip']);
    expect(skip?.description).toBe(skipTool.description);
    expect(skip?.input_schema).toMatchObject({ type: 'object', properties: { reason: { type: 'string' } } });
    expect((skip?.input_schema.required as string[] | undefined) ?? []).not.toContain('reason');
  });

  it('gives the same definitions every time', () => {
    expect(toolDefinitions(['reply', 'skip'])).toEqual(toolDefinitions(['reply', 'skip']));
  });

  it('gives nothing for no names', () => {
    expect(toolDefinitions([])).toEqual([]);
  });

  it('throws on an unknown name', () => {
    expect(() => toolDefinitions(['reply', 'launch_missiles'])).toThrow('unknown tool launch_missiles');
  });
});

describe('registerTool', () => {
  it('refuses a second tool of the same name', () => {
    expect(() => registerTool(replyTool)).toThrow('tool reply is registered twice');
    const impostor = defineTool({
      name: 'skip',
      description: 'not the real skip',
      input: z.object({}),
      endsTurn: false,
    });
    expect(() => registerTool(impostor)).toThrow(/registered twice/);
    expect(toolSpec('skip')).toBe(skipTool);
  });

  it('adds a new tool that toolDefinitions then describes', () => {
    const spec = defineTool({
      name: 'test_lookup_weather',
      description: 'Look up the weather.',
      input: z.object({ city: z.string(), days: z.number().int().optional() }),
      endsTurn: false,
    });
    expect(toolSpec(spec.name)).toBeUndefined();
    registerTool(spec);
    expect(toolSpec(spec.name)).toBe(spec);
    const [def] = toolDefinitions([spec.name]);
    expect(def).toMatchObject({
      name: 'test_lookup_weather',
      description: 'Look up the weather.',
      input_schema: {
        type: 'object',
        properties: { city: { type: 'string' }, days: { type: 'integer' } },
        required: ['city'],
      },
    });
    expect(def?.input_schema).not.toHaveProperty('$schema');
    expect(() => registerTool(spec)).toThrow(/registered twice/);
  });
});

describe('checkToolCalls: what the model step finds wrong with an answer’s tool calls (issue 27)', () => {
  it('answers the errors the model reads, keeps inputs as parsed, and leaves tool servers’ calls to their step', () => {
    const server = { type: 'tool_use' as const, id: 'u4', name: modelToolName('shop', 'lookup'), input: { x: 1 } };
    const content = [
      { type: 'text' as const, text: 'on it' },
      { type: 'tool_use' as const, id: 'u1', name: 'reply', input: { text: 'hi', stray: true } },
      { type: 'tool_use' as const, id: 'u2', name: 'reply', input: { text: '' } },
      { type: 'tool_use' as const, id: 'u3', name: 'set_status', input: { kind: 'outcome', text: 'done' } },
      server,
    ];
    const checked = checkToolCalls(content, CHANNEL_TOOL_NAMES);
    expect(checked.inputErrors).toEqual({
      u2: 'invalid arguments for reply: text: Too small: expected string to have >=1 characters',
      u3: 'unknown tool "set_status"',
    });
    expect(checked.content[1]).toEqual({ type: 'tool_use', id: 'u1', name: 'reply', input: { text: 'hi' } });
    expect(checked.content[4]).toBe(server);
    expect(checkToolCalls([content[0]!], CHANNEL_TOOL_NAMES)).toEqual({ content: [content[0]], inputErrors: {} });
  });
});
