/**
 * Every operation of the OpenAPI document has an operationId, so that generated clients have method names. A route
 * may name its own; otherwise the name comes from its method and path, the way a person would say it:
 * `GET /v1/agents/:agentId/jobs/:id/runs` is getJobRuns, `POST …/jobs` createJob, `POST …/jobs/:id/pause` pauseJob,
 * `PUT /v1/agents/:agentId` putAgent. An agent's routes drop the agent (every one of them is an agent's).
 */
const VERB: Record<string, string> = { GET: 'get', PUT: 'put', PATCH: 'update', DELETE: 'delete', POST: 'create' };

const singular = (word: string) => (word.endsWith('s') ? word.slice(0, -1) : word);
const pascal = (word: string) =>
  word
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join('');

export function operationIdOf(method: string, url: string): string {
  const parts = url.split('/').filter((p) => p && p !== 'v1');
  // Under /v1/agents/:agentId, the agent is implied by every route but the agent's own.
  const scoped = parts[0] === 'agents' && parts[1]?.startsWith(':') && parts.length > 2 ? parts.slice(2) : parts;
  const isParam = (i: number) => scoped[i]?.startsWith(':') ?? false;
  const words: string[] = [];
  scoped.forEach((part, i) => {
    if (!isParam(i)) words.push(isParam(i + 1) ? singular(part) : part);
  });
  const last = scoped[scoped.length - 1] ?? '';
  let verb = VERB[method] ?? method.toLowerCase();
  if (method === 'POST' && !last.startsWith(':')) {
    // A collection is created into (createConversationMessage); anything else is an action (pauseJob, replayRun).
    if (last.endsWith('s')) words[words.length - 1] = singular(last);
    else verb = words.pop() ?? verb;
  }
  return verb + words.map(pascal).join('');
}
