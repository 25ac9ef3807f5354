/**
 * npx tsx scripts/vendor-secret-rules.ts <gitleaks.toml> <tag> <commit>
 *
 * Converts gitleaks' default rules (config/gitleaks.toml of a gitleaks release, MIT) into
 * domain/secret-rules/gitleaks.json, the ruleset the reply guard vendors. Gitleaks writes its regexes for Go's RE2;
 * each is translated to a JavaScript regex here, once, so that the guard (which runs inside workflows) only compiles
 * plain JavaScript. A rule that cannot be translated faithfully, or that only applies to file paths, is left out and
 * listed with the reason under `dropped`. To update: download config/gitleaks.toml of a newer tag and run this again.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { format } from 'prettier';
import { parse } from 'smol-toml';

/** A construct of RE2 that has no faithful JavaScript translation here: the rule using it is dropped. */
export class Unsupported extends Error {}

interface Frame {
  ci: boolean;
  dotAll: boolean;
}

const POSIX: Record<string, string> = {
  alnum: '0-9A-Za-z',
  alpha: 'A-Za-z',
  ascii: '\\x00-\\x7F',
  blank: '\\t ',
  cntrl: '\\x00-\\x1F\\x7F',
  digit: '0-9',
  graph: '!-~',
  lower: 'a-z',
  print: ' -~',
  punct: '!-\\/:-@\\[-`{-~',
  space: '\\t\\n\\v\\f\\r ',
  upper: 'A-Z',
  word: '0-9A-Za-z_',
  xdigit: '0-9A-Fa-f',
};

/** Escapes that mean the same in RE2 and in a JavaScript regex without the `u` flag. */
const SAME_ESCAPES = new Set(['b', 'B', 'd', 'D', 's', 'S', 'w', 'W', 'n', 'r', 't', 'f', 'v']);

/**
 * An RE2 pattern as JavaScript `{source, flags}`. JavaScript before Node 23 has no inline flags: a leading `(?i)`
 * that holds for the whole pattern becomes the `i` flag; scoped ones (`(?i:…)`, `(?-i:…)`, a `(?i)` midway) are
 * expanded, each letter they cover becoming both of its cases (`a` → `[aA]`, `[a-f]` → `[a-fA-F]`). `(?s)` turns `.`
 * into `[\s\S]`, `\z` becomes `$` (no `m` flag), `\A` `^`, `[[:alnum:]]` its ranges, `(?P<n>` `(?<n>`.
 */
export function re2ToJs(re2: string): { source: string; flags: string } {
  const wholeCi = re2.startsWith('(?i)') && !/\(\?[a-z]*-/.test(re2);
  const source = translate(wholeCi ? re2.slice(4) : re2, wholeCi);
  return { source, flags: wholeCi ? 'i' : '' };
}

function translate(p: string, ciByFlag: boolean): string {
  const stack: Frame[] = [{ ci: false, dotAll: false }];
  const top = (): Frame => stack[stack.length - 1] as Frame;
  const fold = () => top().ci && !ciByFlag;
  let out = '';
  let i = 0;
  while (i < p.length) {
    const c = p[i] as string;
    if (c === '\\') {
      const e = escape(p, i, false);
      out += e.text;
      i = e.end;
    } else if (c === '[') {
      const cls = charClass(p, i, fold());
      out += cls.text;
      i = cls.end;
    } else if (c === '(') {
      const rest = p.slice(i);
      const named = /^\(\?P?<([A-Za-z_][A-Za-z0-9_]*)>/.exec(rest);
      const flags = /^\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])/.exec(rest);
      if (named) {
        stack.push({ ...top() });
        out += `(?<${named[1]}>`;
        i += named[0].length;
      } else if (flags) {
        const [all, on = '', off = '', end] = flags;
        for (const f of on + off) if (f !== 'i' && f !== 's') throw new Unsupported(`the inline flag ${f}`);
        const next = { ...top() };
        if (on.includes('i')) next.ci = true;
        if (off.includes('i')) next.ci = false;
        if (on.includes('s')) next.dotAll = true;
        if (off.includes('s')) next.dotAll = false;
        if (end === ')') stack[stack.length - 1] = next;
        else {
          stack.push(next);
          out += '(?:';
        }
        i += all.length;
      } else if (rest.startsWith('(?')) {
        throw new Unsupported(`the group syntax ${rest.slice(0, 4)}`);
      } else {
        stack.push({ ...top() });
        out += '(';
        i++;
      }
    } else if (c === ')') {
      stack.pop();
      if (stack.length === 0) throw new Unsupported('an unbalanced ")"');
      out += ')';
      i++;
    } else if (c === '.') {
      out += top().dotAll ? '[\\s\\S]' : '.';
      i++;
    } else if (c === '{') {
      // A repetition is copied whole, so that its digits are never mistaken for literals.
      const rep = /^\{\d*(?:,\d*)?\}\??/.exec(p.slice(i));
      const text = rep ? rep[0] : '\\{';
      out += text;
      i += rep ? text.length : 1;
    } else if (/[A-Za-z]/.test(c) && fold()) {
      out += `[${c.toLowerCase()}${c.toUpperCase()}]`;
      i++;
    } else {
      out += c;
      i++;
    }
  }
  if (stack.length !== 1) throw new Unsupported('an unclosed group');
  return out;
}

function hexEscape(code: number): string {
  if (code > 0xffff) throw new Unsupported('a code point beyond the BMP');
  return code <= 0xff ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
}

/** One escape at `p[i]` (a backslash): its JavaScript text, the code point when it is a single character. */
function escape(p: string, i: number, inClass: boolean): { text: string; end: number; code?: number } {
  const n = p[i + 1];
  if (n === undefined) throw new Unsupported('a trailing backslash');
  if (n === 'x') {
    const braced = /^\\x\{([0-9a-fA-F]+)\}/.exec(p.slice(i));
    if (braced) {
      const code = parseInt(braced[1] as string, 16);
      return { text: hexEscape(code), end: i + braced[0].length, code };
    }
    const two = /^\\x([0-9a-fA-F]{2})/.exec(p.slice(i));
    if (!two) throw new Unsupported('a malformed \\x escape');
    return { text: two[0], end: i + 4, code: parseInt(two[1] as string, 16) };
  }
  if (!inClass && n === 'z') return { text: '$', end: i + 2 };
  if (!inClass && n === 'A') return { text: '^', end: i + 2 };
  if (SAME_ESCAPES.has(n)) {
    const codes: Record<string, number> = { n: 10, r: 13, t: 9, f: 12, v: 11 };
    // In a class \b is a backspace in both.
    return { text: `\\${n}`, end: i + 2, ...(n in codes ? { code: codes[n] } : {}) };
  }
  if (/[A-Za-z0-9]/.test(n)) throw new Unsupported(`the escape \\${n}`);
  return { text: `\\${n}`, end: i + 2, code: n.charCodeAt(0) };
}

/** A character class at `p[i]` ("["): copied item by item, with the other case of its letters added when folding. */
function charClass(p: string, start: number, fold: boolean): { text: string; end: number } {
  let i = start + 1;
  let out = '[';
  if (p[i] === '^') {
    out += '^';
    i++;
  }
  const ranges: [number, number][] = [];
  let first = true;
  for (;;) {
    const c = p[i];
    if (c === undefined) throw new Unsupported('an unclosed character class');
    // RE2 reads a "]" first in a class as a literal; JavaScript would end the class there.
    if (c === ']' && !first) break;
    first = false;
    if (c === '[' && p[i + 1] === ':') {
      const posix = /^\[:(\^?)([a-z]+):\]/.exec(p.slice(i));
      const body = posix && !posix[1] ? POSIX[posix[2] as string] : undefined;
      if (!posix || body === undefined) throw new Unsupported(`the class ${p.slice(i, i + 10)}`);
      out += body;
      for (const m of body.matchAll(/([A-Za-z])-([A-Za-z])/g))
        ranges.push([(m[1] as string).charCodeAt(0), (m[2] as string).charCodeAt(0)]);
      i += posix[0].length;
      continue;
    }
    const lo = single(p, i);
    if (p[lo.end] === '-' && p[lo.end + 1] !== undefined && p[lo.end + 1] !== ']') {
      const hi = single(p, lo.end + 1);
      if (lo.code === undefined || hi.code === undefined) throw new Unsupported('a range with a class escape');
      out += `${lo.text}-${hi.text}`;
      ranges.push([lo.code, hi.code]);
      i = hi.end;
    } else {
      out += lo.text;
      if (lo.code !== undefined) ranges.push([lo.code, lo.code]);
      i = lo.end;
    }
  }
  if (fold) out += otherCase(ranges);
  return { text: `${out}]`, end: i + 1 };
}

/** One class member: an escape or a literal character (escaped when JavaScript would read it otherwise). */
function single(p: string, i: number): { text: string; end: number; code?: number } {
  const c = p[i] as string;
  if (c === '\\') return escape(p, i, true);
  const text = c === ']' || c === '[' || c === '^' || c === '-' ? `\\${c}` : c;
  return { text, end: i + 1, code: c.charCodeAt(0) };
}

/** The ranges' letters in their other case, as class text. */
function otherCase(ranges: [number, number][]): string {
  let out = '';
  const swap = (from: number, to: number, delta: number) => {
    for (const [lo, hi] of ranges) {
      const a = Math.max(lo, from);
      const b = Math.min(hi, to);
      if (a <= b)
        out +=
          a === b
            ? String.fromCharCode(a + delta)
            : `${String.fromCharCode(a + delta)}-${String.fromCharCode(b + delta)}`;
    }
  };
  swap(97, 122, -32); // a-z → A-Z
  swap(65, 90, 32); // A-Z → a-z
  return out;
}

interface TomlAllowlist {
  condition?: string;
  regexTarget?: string;
  regexes?: string[];
  stopwords?: string[];
  paths?: string[];
  commits?: string[];
}

interface TomlRule {
  id: string;
  regex?: string;
  path?: string;
  entropy?: number;
  keywords?: string[];
  secretGroup?: number;
  allowlists?: TomlAllowlist[];
}

export interface VendoredRegex {
  source: string;
  flags: string;
}

export interface VendoredAllowlist {
  condition: 'OR' | 'AND';
  target: 'secret' | 'match' | 'line';
  regexes: VendoredRegex[];
  stopwords: string[];
}

export interface VendoredRule {
  id: string;
  regex: VendoredRegex;
  keywords: string[];
  entropy?: number;
  secretGroup?: number;
  allowlists?: VendoredAllowlist[];
}

function compiled(re2: string): VendoredRegex {
  const js = re2ToJs(re2);
  try {
    new RegExp(js.source, js.flags);
  } catch (err) {
    throw new Unsupported(`JavaScript refuses the translation: ${(err as Error).message}`);
  }
  return js;
}

/**
 * A literal allowlist entry is a key gitleaks knows to be a public example; an empty group in its middle (same
 * meaning) keeps the vendored file from looking like it holds keys to secret scanners such as GitHub push protection.
 */
function splitLiteral(r: VendoredRegex): VendoredRegex {
  if (r.source.length < 20 || /[\\^$.|?*+()[\]{}]/.test(r.source)) return r;
  const half = Math.floor(r.source.length / 2);
  return { ...r, source: `${r.source.slice(0, half)}(?:)${r.source.slice(half)}` };
}

/**
 * An allowlist as the guard can apply it. Keel scans text, not files or commits: a path or commit condition never
 * holds, so an AND allowlist with one never applies and is left out, and an OR allowlist keeps its other conditions.
 */
function allowlist(a: TomlAllowlist): VendoredAllowlist | undefined {
  const condition = a.condition?.toUpperCase() === 'AND' ? 'AND' : 'OR';
  if (condition === 'AND' && (a.paths?.length || a.commits?.length)) return undefined;
  const regexes = (a.regexes ?? []).map(compiled).map(splitLiteral);
  const stopwords = (a.stopwords ?? []).map((w) => w.toLowerCase());
  if (regexes.length === 0 && stopwords.length === 0) return undefined;
  const target = a.regexTarget === 'match' || a.regexTarget === 'line' ? a.regexTarget : 'secret';
  return { condition, target, regexes, stopwords };
}

export function convert(toml: string): {
  allowlist: { regexes: VendoredRegex[]; stopwords: string[] };
  rules: VendoredRule[];
  dropped: { id: string; why: string }[];
} {
  const config = parse(toml) as unknown as { allowlist?: TomlAllowlist; rules: TomlRule[] };
  const rules: VendoredRule[] = [];
  const dropped: { id: string; why: string }[] = [];
  for (const r of config.rules) {
    if (r.path !== undefined) {
      dropped.push({ id: r.id, why: 'applies to file paths only; Keel scans text, not files' });
      continue;
    }
    if (r.regex === undefined) {
      dropped.push({ id: r.id, why: 'has no regex' });
      continue;
    }
    try {
      const allowlists = (r.allowlists ?? []).map(allowlist).filter((a) => a !== undefined);
      rules.push({
        id: r.id,
        regex: compiled(r.regex),
        keywords: (r.keywords ?? []).map((k) => k.toLowerCase()),
        ...(r.entropy !== undefined ? { entropy: r.entropy } : {}),
        ...(r.secretGroup !== undefined ? { secretGroup: r.secretGroup } : {}),
        ...(allowlists.length ? { allowlists } : {}),
      });
    } catch (err) {
      if (!(err instanceof Unsupported)) throw err;
      dropped.push({ id: r.id, why: `uses ${err.message}` });
    }
  }
  const global = config.allowlist ?? {};
  return {
    allowlist: {
      regexes: (global.regexes ?? []).map(compiled),
      stopwords: (global.stopwords ?? []).map((w) => w.toLowerCase()),
    },
    rules,
    dropped,
  };
}

async function main(): Promise<void> {
  const [file, tag, commit] = process.argv.slice(2);
  if (!file || !tag || !commit) {
    console.error('usage: npx tsx scripts/vendor-secret-rules.ts <gitleaks.toml> <tag> <commit>');
    process.exit(2);
  }
  const converted = convert(readFileSync(file, 'utf8'));
  const out = {
    source: `https://github.com/gitleaks/gitleaks/blob/${tag}/config/gitleaks.toml`,
    version: tag,
    commit,
    licence: 'MIT, Copyright (c) 2019 Zachary Rice; see NOTICE in this folder',
    generatedBy: 'scripts/vendor-secret-rules.ts (RE2 to JavaScript; path-only and untranslatable rules dropped)',
    ...converted,
  };
  const target = path.resolve(__dirname, '../domain/secret-rules/gitleaks.json');
  // Formatted as `npm run lint` checks it.
  writeFileSync(target, await format(JSON.stringify(out), { parser: 'json', printWidth: 120 }));
  console.log(`${converted.rules.length} rules kept, ${converted.dropped.length} dropped → ${target}`);
  for (const d of converted.dropped) console.log(`  dropped ${d.id}: ${d.why}`);
}

if (require.main === module) void main();
