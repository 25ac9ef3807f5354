/** What a per-agent view says before an agent is chosen. */
export function AgentNeeded({ what }: { what: string }) {
  return <p className="notice">Type an agent id in Agent above and press Enter to see its {what}.</p>;
}
