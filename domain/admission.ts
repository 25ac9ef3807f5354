import { CANONICAL_FILES, CONSTITUTION, isWritable, type MemoryFiles } from './memory';
import type { Proposal } from './reflection';
import { describeFinding, findSecret } from './secret-scan';

/**
 * The admission gates of a reflection proposal: deterministic, pure, each reported by name. A proposal is admitted
 * or rejected whole: one hard failure rejects every edit in it. Soft checks are reported and never block.
 */

export const ADMISSION = {
  maxGrowthLinesPerFile: 80,
  maxGrowthLinesTotal: 100,
  /** Shrinking a file by more than this fraction needs action `compact`. */
  maxShrinkWithoutCompact: 0.7,
  nearDuplicateJaccard: 0.9,
  judgeVetoConfidence: 0.7,
} as const;

export type CheckName =
  | 'writable_files'
  | 'constitution_unchanged'
  | 'canonical_files_kept'
  | 'growth_limits'
  | 'no_file_emptied'
  | 'shrink_needs_compact'
  | 'balanced_fences'
  | 'no_credentials'
  | 'url_allowlist'
  | 'near_duplicate_bullets'
  | 'judges'
  | 'human_approval'
  | 'base_unchanged';

export interface Check {
  name: CheckName;
  kind: 'hard' | 'soft';
  passed: boolean;
  detail?: string;
  /** A failure that says nothing about the proposal (a judge that did not answer): its summaries are not blamed. */
  transient?: boolean;
}

/** The words Phantom's I6 scans for, besides the secret scanner (seed patterns and gitleaks' rules). */
const CREDENTIAL_WORDS: readonly { name: string; pattern: RegExp }[] = [
  { name: 'ANTHROPIC_API_KEY', pattern: /ANTHROPIC_API_KEY/ },
  { name: 'api_key=', pattern: /api_key\s*=/i },
  { name: 'secret_key=', pattern: /secret_key\s*=/i },
  { name: 'bearer', pattern: /\bbearer\s+\S/i },
];

const lines = (text: string) => (text === '' ? [] : text.replace(/\n$/, '').split('\n'));

/** The files after the proposal, as they would be stored. */
export function applyEdits(current: MemoryFiles, proposal: Proposal): MemoryFiles {
  const next = { ...current };
  for (const e of proposal.edits) {
    if (e.action === 'delete') delete next[e.file];
    else next[e.file] = e.content;
  }
  return next;
}

/**
 * Each file a proposal touches, in the order it first touches it, as `base` has it and as the proposal leaves it (null:
 * absent): what a person deciding on the proposal reads, as a diff.
 */
export function fileChanges(
  base: MemoryFiles,
  proposal: Proposal,
): { path: string; before: string | null; after: string | null }[] {
  const after = applyEdits(base, proposal);
  const at = (files: MemoryFiles, path: string) => (Object.hasOwn(files, path) ? (files[path] ?? null) : null);
  return [...new Set(proposal.edits.map((e) => e.file))].map((path) => ({
    path,
    before: at(base, path),
    after: at(after, path),
  }));
}

/** Lines of `after` that `before` does not have (as a multiset): what the proposal adds. */
function addedLines(before: string, after: string): string[] {
  const pool = new Map<string, number>();
  for (const l of lines(before)) pool.set(l, (pool.get(l) ?? 0) + 1);
  const added: string[] = [];
  for (const l of lines(after)) {
    const n = pool.get(l) ?? 0;
    if (n > 0) pool.set(l, n - 1);
    else added.push(l);
  }
  return added;
}

function jaccard(a: string, b: string): number {
  const wa = new Set(a.toLowerCase().match(/[a-z0-9]+/g) ?? []);
  const wb = new Set(b.toLowerCase().match(/[a-z0-9]+/g) ?? []);
  if (wa.size === 0 && wb.size === 0) return 1;
  let shared = 0;
  for (const w of wa) if (wb.has(w)) shared++;
  return shared / (wa.size + wb.size - shared);
}

const fail = (name: CheckName, detail: string): Check => ({ name, kind: 'hard', passed: false, detail });
const pass = (name: CheckName, kind: Check['kind'] = 'hard'): Check => ({ name, kind, passed: true });

/** Runs every deterministic gate; the proposal is admitted only if every hard check passed. */
export function checkProposal(
  current: MemoryFiles,
  proposal: Proposal,
  opts: { urlAllowlist: readonly string[] },
): Check[] {
  const next = applyEdits(current, proposal);
  const touched = [...new Set(proposal.edits.map((e) => e.file))];
  const checks: Check[] = [];

  const unwritable = touched.filter((f) => !isWritable(f) && !(f === CONSTITUTION && next[f] === current[f]));
  checks.push(
    unwritable.length ? fail('writable_files', `not writable: ${unwritable.join(', ')}`) : pass('writable_files'),
  );

  checks.push(
    next[CONSTITUTION] === current[CONSTITUTION]
      ? pass('constitution_unchanged')
      : fail('constitution_unchanged', `${CONSTITUTION} must stay byte-identical`),
  );

  const deleted = CANONICAL_FILES.filter((f) => f in current && !(f in next));
  checks.push(
    deleted.length ? fail('canonical_files_kept', `deleted: ${deleted.join(', ')}`) : pass('canonical_files_kept'),
  );

  const growth = touched.map((f) => ({
    f,
    added: Math.max(0, lines(next[f] ?? '').length - lines(current[f] ?? '').length),
  }));
  const total = growth.reduce((s, g) => s + g.added, 0);
  const tooBig = growth.filter((g) => g.added > ADMISSION.maxGrowthLinesPerFile);
  checks.push(
    tooBig.length
      ? fail(
          'growth_limits',
          tooBig.map((g) => `${g.f} grows by ${g.added} lines (at most ${ADMISSION.maxGrowthLinesPerFile})`).join('; '),
        )
      : total > ADMISSION.maxGrowthLinesTotal
        ? fail('growth_limits', `the files grow by ${total} lines in total (at most ${ADMISSION.maxGrowthLinesTotal})`)
        : pass('growth_limits'),
  );

  const emptied = touched.filter((f) => (current[f] ?? '').trim() !== '' && f in next && (next[f] ?? '').trim() === '');
  checks.push(emptied.length ? fail('no_file_emptied', `emptied: ${emptied.join(', ')}`) : pass('no_file_emptied'));

  const shrunk = proposal.edits.filter((e) => {
    const before = lines(current[e.file] ?? '').length;
    const after = lines(next[e.file] ?? '').length;
    // A delete is a shrink to nothing: only an empty file may go without a compaction.
    return e.action !== 'compact' && before > 0 && (before - after) / before > ADMISSION.maxShrinkWithoutCompact;
  });
  checks.push(
    shrunk.length
      ? fail(
          'shrink_needs_compact',
          `shrinks by more than 70% without action compact: ${shrunk.map((e) => e.file).join(', ')}`,
        )
      : pass('shrink_needs_compact'),
  );

  const unbalanced = touched.filter((f) => f.endsWith('.md') && f in next && openFence(next[f] ?? ''));
  checks.push(
    unbalanced.length
      ? fail('balanced_fences', `unbalanced code fences in ${unbalanced.join(', ')}`)
      : pass('balanced_fences'),
  );

  const credentials = touched.flatMap((f) => {
    const added = addedLines(current[f] ?? '', next[f] ?? '');
    // The added lines are scanned together, so that a rule spanning lines (a PEM block) sees them all.
    const secret = added.length ? findSecret(added.join('\n')) : undefined;
    const words = added.flatMap((l) => CREDENTIAL_WORDS.filter((p) => p.pattern.test(l)).map((p) => p.name));
    return [...(secret ? [describeFinding(secret)] : []), ...words].map((name) => `${f}: ${name}`);
  });
  checks.push(
    credentials.length
      ? fail('no_credentials', `credential patterns in new lines: ${[...new Set(credentials)].join(', ')}`)
      : pass('no_credentials'),
  );

  // Soft checks: logged with the proposal, never blocking.
  const urls = touched.flatMap((f) =>
    addedLines(current[f] ?? '', next[f] ?? '').flatMap((l) => l.match(/https?:\/\/[^\s)>\]]+/g) ?? []),
  );
  const outside = urls.filter((u) => {
    const host = safeHost(u);
    return !host || !opts.urlAllowlist.some((allowed) => host === allowed || host.endsWith(`.${allowed}`));
  });
  checks.push(
    outside.length
      ? {
          name: 'url_allowlist',
          kind: 'soft',
          passed: false,
          detail: `URLs outside the allowlist: ${outside.join(', ')}`,
        }
      : pass('url_allowlist', 'soft'),
  );

  const duplicates = touched.flatMap((f) => {
    const bullets = lines(next[f] ?? '').filter((l) => /^\s*[-*] /.test(l));
    const pairs: string[] = [];
    for (let i = 0; i < bullets.length; i++) {
      for (let j = i + 1; j < bullets.length; j++)
        if (jaccard(bullets[i]!, bullets[j]!) >= ADMISSION.nearDuplicateJaccard)
          pairs.push(`${f}: "${bullets[j]!.trim()}"`);
    }
    return pairs;
  });
  checks.push(
    duplicates.length
      ? {
          name: 'near_duplicate_bullets',
          kind: 'soft',
          passed: false,
          detail: `near-duplicate bullets: ${duplicates.join('; ')}`,
        }
      : pass('near_duplicate_bullets', 'soft'),
  );
  return checks;
}

/** Whether a Markdown text ends inside a code fence: a fence closes only with its own character, at least as long. */
function openFence(text: string): boolean {
  let open: { char: string; length: number } | undefined;
  for (const line of lines(text)) {
    const m = /^ {0,3}(`{3,}|~{3,})(.*)$/.exec(line);
    if (!m) continue;
    const run = m[1]!;
    if (!open) open = { char: run[0]!, length: run.length };
    else if (run[0] === open.char && run.length >= open.length && m[2]!.trim() === '') open = undefined;
  }
  return open !== undefined;
}

function safeHost(url: string): string | undefined {
  try {
    return new URL(url).hostname.toLowerCase();
  } catch {
    return undefined;
  }
}

export const hardFailures = (checks: readonly Check[]) => checks.filter((c) => c.kind === 'hard' && !c.passed);

/** A judge's verdict; any failing judge with confidence ≥ 0.7 vetoes, and a judge that errs fails closed. */
export type JudgeVerdict =
  { ok: true; pass: boolean; confidence: number; reason: string } | { ok: false; error: string };

export function judgesCheck(verdicts: readonly JudgeVerdict[]): Check {
  const vetoes = verdicts.flatMap((v, i) =>
    !v.ok
      ? [`judge ${i + 1} failed to answer (${v.error})`]
      : !v.pass && v.confidence >= ADMISSION.judgeVetoConfidence
        ? [`judge ${i + 1}: ${v.reason} (confidence ${v.confidence})`]
        : [],
  );
  if (!vetoes.length) return pass('judges');
  const onlyErrors = verdicts.every((v) => (v.ok ? v.pass || v.confidence < ADMISSION.judgeVetoConfidence : true));
  return { ...fail('judges', vetoes.join('; ')), ...(onlyErrors ? { transient: true } : {}) };
}
