import { useQuery } from '@tanstack/react-query';

/**
 * The page's own settings, which the server serves beside the console's files (api/console.ts): not a route of the
 * REST API, so not in its OpenAPI document.
 */
export interface ConsoleConfig {
  temporalUiUrl: string | null;
  namespace: string;
}

/** What the server tells the page about its surroundings: where the Temporal UI is, and the namespace. */
export async function loadConsoleConfig(): Promise<ConsoleConfig> {
  const res = await fetch('/console/config.json', { cache: 'no-store' });
  if (!res.ok) return { temporalUiUrl: null, namespace: 'default' };
  return (await res.json()) as ConsoleConfig;
}

/** The server's settings, read once for the page's life (they change only with the server). */
export const useConsoleConfig = (): ConsoleConfig | undefined =>
  useQuery({ queryKey: ['console-config'], queryFn: loadConsoleConfig, staleTime: Infinity }).data;

/** A workflow's page in the Temporal UI, or null when the server knows no UI. */
export function temporalUiLink(config: ConsoleConfig | undefined, workflowId: string): string | null {
  if (!config?.temporalUiUrl) return null;
  const base = config.temporalUiUrl.replace(/\/+$/, '');
  return `${base}/namespaces/${encodeURIComponent(config.namespace)}/workflows/${encodeURIComponent(workflowId)}`;
}

/**
 * A conversation's workflow id (README: `conv:<agentId>:<conversationId>`), for a conversation opened by its id
 * before the list said it.
 */
export const conversationWorkflowId = (agentId: string, conversationId: string) => `conv:${agentId}:${conversationId}`;
