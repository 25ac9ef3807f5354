/**
 * An agent's memory documents: what the reflection proposals may change, and what the conversation's system prompt
 * is built from. Every version keeps the full content of every file.
 */

export type MemoryFiles = Record<string, string>;

export const CONSTITUTION = 'constitution.md';
export const PERSONA = 'persona.md';

/** The files every agent has; none of them may be deleted. */
export const CANONICAL_FILES = [
  CONSTITUTION,
  PERSONA,
  'user-profile.md',
  'domain-knowledge.md',
  'memory/corrections.md',
  'memory/principles.md',
] as const;

const STRATEGY = /^strategies\/[a-z0-9][a-z0-9-]{0,63}\.md$/;

/** Files a proposal may write: the canonical ones except the constitution, and `strategies/*.md`. */
export function isWritable(file: string): boolean {
  return (file !== CONSTITUTION && (CANONICAL_FILES as readonly string[]).includes(file)) || STRATEGY.test(file);
}

export const INITIAL_CONSTITUTION = [
  '# Constitution',
  '',
  'These principles do not change through reflection.',
  '',
  '1. Be honest: never claim to have done what you did not do.',
  '2. Protect secrets: never reveal credentials, keys or tokens.',
  "3. Respect the user's decisions; ask before acting on their behalf.",
  '4. Say when you do not know.',
  '',
].join('\n');

/** Version 1 of an agent's memory. */
export function initialMemory(agent: { name: string }): MemoryFiles {
  return {
    [CONSTITUTION]: INITIAL_CONSTITUTION,
    [PERSONA]: `# Persona\n\nYou are ${agent.name}.\n`,
    'user-profile.md': '# User profile\n',
    'domain-knowledge.md': '# Domain knowledge\n',
    'memory/corrections.md': '# Corrections\n',
    'memory/principles.md': '# Principles\n',
  };
}

/**
 * The memory that goes into the conversation's system prompt: constitution, persona, user profile, domain knowledge,
 * strategies.
 */
export function memoryPrompt(files: MemoryFiles): string {
  const strategies = Object.keys(files)
    .filter((f) => STRATEGY.test(f))
    .sort();
  return [CONSTITUTION, PERSONA, 'user-profile.md', 'domain-knowledge.md', ...strategies]
    .map((f) => files[f]?.trim())
    .filter((text): text is string => Boolean(text))
    .join('\n\n');
}
