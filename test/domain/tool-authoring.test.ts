import { describe, expect, it } from 'vitest';
import type { ModelMessage } from '../../domain/model';
import {
  AUTHORING_SYSTEM,
  AI_SYSTEM,
  authoringMessage,
  parseScore,
  repairMessage,
  scriptedRoutineAnswer,
} from '../../domain/tool-authoring';

const user = (text: string): ModelMessage[] => [{ role: 'user', content: [{ type: 'text', text }] }];
const tables = [{ name: 'leads', columns: ['name', 'email'] }];
const tool = (name: string) => ({
  name,
  title: name,
  purpose: 'p',
  inputs: ['input'],
  code: `async function ${name}() { return 1; }`,
});

describe('the authoring request', () => {
  it('carries the capabilities with their argument shapes, the prompt and the table schema', () => {
    for (const cap of [
      'data.list(table)',
      'data.get(table, id)',
      'data.upsert(table, record)',
      'ai.score(text, rubric)',
      'integrations.call(name, payload)',
      'send(text, destination?)',
      'browser(instruction)',
    ]) {
      expect(AUTHORING_SYSTEM).toContain(cap);
    }
    expect(authoringMessage('score them', tables)).toBe(
      "Routine prompt:\nscore them\n\nThe app's tables:\n- leads(id, name, email)",
    );
    expect(repairMessage('score them', tables, 'ReferenceError: x is not defined')).toContain(
      'Your previous attempt crashed on a smoke run with: ReferenceError: x is not defined',
    );
  });

  it('reads a score out of a reply, clamped to 0–100', () => {
    expect([parseScore('87'), parseScore('Score: 140'), parseScore('-3'), parseScore('none')]).toEqual([
      87,
      100,
      0,
      undefined,
    ]);
  });
});

describe('the scripted model as an author', () => {
  it('answers with the tool after /author, and a repair with the tool after /repair', () => {
    const prompt = `Score leads /author ${JSON.stringify(tool('first'))} /repair ${JSON.stringify(tool('second'))}`;
    expect(JSON.parse(scriptedRoutineAnswer(AUTHORING_SYSTEM, user(authoringMessage(prompt, tables)))!)).toMatchObject({
      name: 'first',
    });
    expect(
      JSON.parse(scriptedRoutineAnswer(AUTHORING_SYSTEM, user(repairMessage(prompt, tables, 'boom')))!),
    ).toMatchObject({ name: 'second' });
  });

  it('repeats the same tool for a repair when the prompt has no /repair, and authors nothing without /author', () => {
    const prompt = `x /author ${JSON.stringify(tool('only'))}`;
    expect(
      JSON.parse(scriptedRoutineAnswer(AUTHORING_SYSTEM, user(repairMessage(prompt, tables, 'boom')))!),
    ).toMatchObject({ name: 'only' });
    expect(scriptedRoutineAnswer(AUTHORING_SYSTEM, user(authoringMessage('no tool here', tables)))).toMatch(
      /only from `\/author \{json\}`/,
    );
  });

  it('answers ai.* deterministically and leaves every other request to the conversation rules', () => {
    const score = scriptedRoutineAnswer(AI_SYSTEM.score, user('Rubric: r\n\nText:\nada@example.com'));
    expect(score).toMatch(/^\d+$/);
    expect(scriptedRoutineAnswer(AI_SYSTEM.score, user('Rubric: r\n\nText:\nada@example.com'))).toBe(score);
    expect(scriptedRoutineAnswer(AI_SYSTEM.write, user('a note to Ada'))).toBe('draft: a note to Ada');
    expect(scriptedRoutineAnswer(AI_SYSTEM.summarize, user('long   text'))).toBe('summary: long text');
    expect(scriptedRoutineAnswer('You are an agent.', user('hello'))).toBeUndefined();
  });
});
