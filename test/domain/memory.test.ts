import { describe, expect, it } from 'vitest';
import {
  CANONICAL_FILES,
  CONSTITUTION,
  INITIAL_CONSTITUTION,
  PERSONA,
  initialMemory,
  isWritable,
  memoryPrompt,
} from '../../domain/memory';

describe('initialMemory', () => {
  const files = initialMemory({ name: 'Ada' });

  it('has every canonical file and nothing else', () => {
    expect(Object.keys(files).sort()).toEqual([...CANONICAL_FILES].sort());
  });

  it('starts with the constitution and a persona naming the agent', () => {
    expect(files[CONSTITUTION]).toBe(INITIAL_CONSTITUTION);
    expect(files[PERSONA]).toContain('You are Ada.');
    expect(INITIAL_CONSTITUTION).toMatch(/never reveal credentials/);
  });
});

describe('isWritable', () => {
  it.each([
    'persona.md',
    'user-profile.md',
    'domain-knowledge.md',
    'memory/corrections.md',
    'memory/principles.md',
    'strategies/deploy.md',
    'strategies/a1-b2.md',
  ])('%s is writable', (file) => {
    expect(isWritable(file)).toBe(true);
  });

  it.each([
    'constitution.md',
    'notes.md',
    'strategies/.md',
    'strategies/-x.md',
    'strategies/Deploy.md',
    'strategies/de_ploy.md',
    'strategies/a/b.md',
    'strategies/../persona.md',
    'strategies/x.md.bak',
    `strategies/${'a'.repeat(65)}.md`,
    'memory/other.md',
    './persona.md',
  ])('%s is not writable', (file) => {
    expect(isWritable(file)).toBe(false);
  });

  it('a strategy name may have up to 64 characters', () => {
    expect(isWritable(`strategies/${'a'.repeat(64)}.md`)).toBe(true);
  });
});

describe('memoryPrompt', () => {
  const files = {
    ...initialMemory({ name: 'Ada' }),
    'user-profile.md': '# User profile\n\n- Prefers tea.\n',
    'domain-knowledge.md': '# Domain knowledge\n\n- Deploys on Fridays.\n',
    'memory/corrections.md': '# Corrections\n\n- CORRECTION-TEXT\n',
    'memory/principles.md': '# Principles\n\n- PRINCIPLE-TEXT\n',
    'strategies/zeta.md': '# Zeta strategy\n',
    'strategies/alpha.md': '# Alpha strategy\n',
  };
  const prompt = memoryPrompt(files);

  it('holds constitution, persona, user profile, domain knowledge, then the strategies sorted by name', () => {
    const order = [
      '# Constitution',
      '# Persona',
      'You are Ada.',
      '- Prefers tea.',
      '- Deploys on Fridays.',
      '# Alpha strategy',
      '# Zeta strategy',
    ].map((s) => prompt.indexOf(s));
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
  });

  it('leaves out memory/corrections.md and memory/principles.md', () => {
    expect(prompt).not.toContain('CORRECTION-TEXT');
    expect(prompt).not.toContain('PRINCIPLE-TEXT');
    expect(prompt).not.toContain('# Corrections');
  });

  it('leaves out files that are not memory documents', () => {
    expect(memoryPrompt({ ...files, 'notes.md': 'NOTES-TEXT', 'strategies/Bad.md': 'BAD-TEXT' })).not.toMatch(
      /NOTES-TEXT|BAD-TEXT/,
    );
  });

  it('joins trimmed files with one blank line and skips missing or blank ones', () => {
    expect(
      memoryPrompt({
        [CONSTITUTION]: '  # C  \n\n',
        [PERSONA]: '\n \n',
        'domain-knowledge.md': '# D\n',
        'strategies/s.md': '# S\n',
      }),
    ).toBe('# C\n\n# D\n\n# S');
    expect(memoryPrompt({})).toBe('');
  });
});
