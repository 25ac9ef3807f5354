import { describeFinding, findSecret, type SecretRules } from './secret-scan';

/**
 * The reply guard: every outbound text passes here before any delivery. It blocks tool-call syntax leaking into
 * user-visible text and secrets (domain/secret-scan.ts: the eleven seed patterns and gitleaks' rules), checked on the
 * raw text and on its URL-, base64- and hex-decoded forms. Pure: it runs inside the conversation workflow.
 */

export { SECRET_PATTERNS, base64Decode } from './secret-scan';

const TOOL_SYNTAX_PREFIXES = ['{', '[', '(', '<system-reminder>', '<path>'];

export type GuardVerdict = { ok: true } | { ok: false; rule: 'tool_syntax' | 'secret'; detail: string };

export function checkReply(text: string, opts: { rules?: SecretRules } = {}): GuardVerdict {
  // Zero-width and byte-order characters are invisible: they must hide neither a leading "{" nor a secret.
  const visible = text.replace(/[\u200B-\u200D\u2060\uFEFF]/g, '');
  const trimmed = visible.trim();
  if (trimmed.length === 0) return { ok: false, rule: 'tool_syntax', detail: 'the reply is empty' };
  const lower = trimmed.toLowerCase();
  if (TOOL_SYNTAX_PREFIXES.some((p) => lower.startsWith(p))) {
    return {
      ok: false,
      rule: 'tool_syntax',
      detail: `the reply starts with "${trimmed.slice(0, 1)}", which looks like tool-call syntax`,
    };
  }
  if (lower.replace(/[^a-z]/g, '') === 'skip') {
    return { ok: false, rule: 'tool_syntax', detail: 'the reply is the word "skip"; call the skip tool instead' };
  }
  const secret = findSecret(visible, opts.rules);
  if (secret) {
    return {
      ok: false,
      rule: 'secret',
      detail: `the reply contains what looks like a secret (${describeFinding(secret)})`,
    };
  }
  return { ok: true };
}

/** The message the model reads when its reply was blocked. It never repeats the blocked text. */
export function guardErrorForModel(verdict: Extract<GuardVerdict, { ok: false }>): string {
  return `Reply blocked by the reply guard: ${verdict.detail}. Nothing was sent. Rewrite the reply without it.`;
}
