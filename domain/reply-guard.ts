/**
 * The reply guard: every outbound text passes here before any delivery. It blocks tool-call syntax leaking into
 * user-visible text and the eleven secret patterns Spacebot scans for, checked on the raw text and on its URL-,
 * base64- and hex-decoded forms. Pure: it runs inside the conversation workflow.
 */

export const SECRET_PATTERNS: readonly { name: string; pattern: RegExp }[] = [
  { name: 'openai_key', pattern: /sk-[a-zA-Z0-9]{20,}/ },
  { name: 'anthropic_key', pattern: /sk-ant-[a-zA-Z0-9_-]{20,}/ },
  { name: 'openrouter_key', pattern: /sk-or-[a-zA-Z0-9_-]{20,}/ },
  { name: 'private_key', pattern: /-----BEGIN.*PRIVATE KEY-----/ },
  { name: 'github_token', pattern: /ghp_[a-zA-Z0-9]{36}/ },
  { name: 'google_api_key', pattern: /AIza[0-9A-Za-z_-]{35}/ },
  { name: 'discord_token', pattern: /[MN][A-Za-z0-9]{23,}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}/ },
  { name: 'slack_bot_token', pattern: /xoxb-[0-9]{10,}-[0-9A-Za-z-]+/ },
  { name: 'slack_app_token', pattern: /xapp-[0-9]-[A-Z0-9]+-[0-9]+-[a-f0-9]+/ },
  { name: 'telegram_token', pattern: /\d{8,}:[A-Za-z0-9_-]{35}/ },
  { name: 'brave_key', pattern: /BSA[a-zA-Z0-9]{20,}/ },
];

const TOOL_SYNTAX_PREFIXES = ['{', '[', '(', '<system-reminder>', '<path>'];

export type GuardVerdict = { ok: true } | { ok: false; rule: 'tool_syntax' | 'secret'; detail: string };

export function checkReply(text: string): GuardVerdict {
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
  for (const form of decodedForms(visible)) {
    for (const { name, pattern } of SECRET_PATTERNS) {
      if (pattern.test(form.text)) {
        return {
          ok: false,
          rule: 'secret',
          detail:
            'the reply contains what looks like a secret ' +
            `(${name}${form.how === 'raw' ? '' : `, ${form.how}-encoded`})`,
        };
      }
    }
  }
  return { ok: true };
}

/** The message the model reads when its reply was blocked. It never repeats the blocked text. */
export function guardErrorForModel(verdict: Extract<GuardVerdict, { ok: false }>): string {
  return `Reply blocked by the reply guard: ${verdict.detail}. Nothing was sent. Rewrite the reply without it.`;
}

interface Form {
  how: 'raw' | 'url' | 'base64' | 'hex';
  text: string;
}

function* decodedForms(text: string): Generator<Form> {
  yield { how: 'raw', text };
  const url = urlDecode(text);
  if (url !== text) yield { how: 'url', text: url };
  // A run may begin with characters that are not part of the encoded secret (a URL path, say), so every
  // alignment of the run is decoded: four for base64's 6-bit groups, two for hex digits.
  for (const run of text.match(/[A-Za-z0-9+/_-]{24,}={0,2}/g) ?? []) {
    for (let offset = 0; offset < 4; offset++) {
      const decoded = base64Decode(run.slice(offset));
      if (decoded) yield { how: 'base64', text: decoded };
    }
  }
  for (const run of text.match(/[0-9a-fA-F]{40,}/g) ?? []) {
    yield { how: 'hex', text: hexDecode(run) };
    yield { how: 'hex', text: hexDecode(run.slice(1)) };
  }
}

function urlDecode(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    // A stray % makes decodeURIComponent throw; decode what can be decoded.
    return text.replace(/%([0-9a-fA-F]{2})/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
  }
}

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** Standard and URL-safe base64 to a byte string; undefined when the run is not base64. */
export function base64Decode(run: string): string | undefined {
  let clean = run.replace(/-/g, '+').replace(/_/g, '/').replace(/=+$/, '');
  // A single trailing character holds too few bits for a byte: it is dropped, not an error.
  if (clean.length % 4 === 1) clean = clean.slice(0, -1);
  let bits = 0;
  let value = 0;
  let out = '';
  for (const ch of clean) {
    const v = B64.indexOf(ch);
    if (v < 0) return undefined;
    value = (value << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += String.fromCharCode((value >> bits) & 0xff);
    }
  }
  return out;
}

function hexDecode(run: string): string {
  let out = '';
  for (let i = 0; i + 1 < run.length; i += 2) out += String.fromCharCode(parseInt(run.slice(i, i + 2), 16));
  return out;
}
