/**
 * What the console remembers for this tab only: the API token and the agent being looked at. sessionStorage, not
 * localStorage, so that a token does not outlive the tab; never a URL, where it would reach logs and history.
 */
const TOKEN_KEY = 'keel.token';
const AGENT_KEY = 'keel.agent';

/** Storage can be refused (a privacy mode): the console then forgets at reload, and works otherwise. */
function read(key: string): string | null {
  try {
    return sessionStorage.getItem(key);
  } catch {
    return null;
  }
}

function write(key: string, value: string | null): void {
  try {
    if (value === null || value === '') sessionStorage.removeItem(key);
    else sessionStorage.setItem(key, value);
  } catch {
    // see read()
  }
}

export const readToken = (): string | null => read(TOKEN_KEY);
export const saveToken = (token: string | null): void => write(TOKEN_KEY, token);
export const readAgent = (): string => read(AGENT_KEY) ?? '';
export const saveAgent = (agentId: string): void => write(AGENT_KEY, agentId);
