import type { Candidate } from './api-types';

/**
 * A candidate as a person typed it: a JSON object (no text at all is the agent as it is), or why it is not one. Its
 * fields are the API's to check: its 400 names the one that is wrong.
 */
export function parseCandidate(text: string): { candidate: Candidate } | { error: string } {
  if (!text.trim()) return { candidate: {} };
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    return { error: `The candidate is not valid JSON: ${err instanceof Error ? err.message : String(err)}` };
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    return { error: 'The candidate must be a JSON object, such as {"model": "…"}' };
  return { candidate: parsed };
}

/** Conversation ids as typed: separated by commas (or spaces), blanks left out. */
export const idsOf = (text: string) => text.split(/[\s,]+/).filter(Boolean);
