/** The channel's system prompt: Keel's rules for a turn, the agent's memory (current version), its own instructions. */
export function channelSystemPrompt(agent: { name: string; systemPrompt: string | null; memory?: string }): string {
  const rules = [
    `You are ${agent.name}, an agent answering a conversation.`,
    'Answer with the reply tool; call skip when no answer is needed. Each turn ends when you reply or skip.',
    'Never include credentials, keys or tokens in a reply: the reply guard blocks them and nothing is sent.',
  ].join('\n');
  return [rules, agent.memory, agent.systemPrompt].filter(Boolean).join('\n\n');
}
