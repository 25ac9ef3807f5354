import { describe, expect, it } from 'vitest';
import {
  ADMISSION,
  applyEdits,
  checkProposal,
  hardFailures,
  judgesCheck,
  type Check,
  type CheckName,
} from '../../domain/admission';
import { CONSTITUTION, INITIAL_CONSTITUTION, PERSONA, initialMemory, type MemoryFiles } from '../../domain/memory';
import type { Proposal, ProposalEdit } from '../../domain/reflection';

const memory = initialMemory({ name: 'Ada' });
const allowlist = { urlAllowlist: ['github.com', 'docs.temporal.io'] };

const edit = (file: string, content: string, action: ProposalEdit['action'] = 'edit'): ProposalEdit => ({
  file,
  action,
  content,
  summary: '',
  rationale: '',
  conversationIds: [],
});
const proposal = (...edits: ProposalEdit[]): Proposal => ({ status: 'ok', edits });

/** `n` distinct, non-bullet lines. */
const numbered = (n: number, word = 'line') => Array.from({ length: n }, (_, i) => `${word} ${i + 1}\n`).join('');

function run(p: Proposal, current: MemoryFiles = memory): Check[] {
  return checkProposal(current, p, allowlist);
}
function check(checks: readonly Check[], name: CheckName): Check {
  const c = checks.find((x) => x.name === name);
  if (!c) throw new Error(`no check named ${name}`);
  return c;
}

describe('checkProposal: the report', () => {
  it('names the 8 hard gates and the 2 soft checks, in order', () => {
    const checks = run(proposal(edit('user-profile.md', '# User profile\n\n- Prefers short answers.\n')));
    expect(checks.map((c) => [c.name, c.kind])).toEqual([
      ['writable_files', 'hard'],
      ['constitution_unchanged', 'hard'],
      ['canonical_files_kept', 'hard'],
      ['growth_limits', 'hard'],
      ['no_file_emptied', 'hard'],
      ['shrink_needs_compact', 'hard'],
      ['balanced_fences', 'hard'],
      ['no_credentials', 'hard'],
      ['url_allowlist', 'soft'],
      ['near_duplicate_bullets', 'soft'],
    ]);
    expect(checks.every((c) => c.passed)).toBe(true);
    expect(hardFailures(checks)).toEqual([]);
  });

  it('rejects a proposal whole: one bad edit among good ones is a hard failure', () => {
    const checks = run(
      proposal(edit('user-profile.md', '# User profile\n\n- Likes tea.\n'), edit('notes.md', 'anything\n')),
    );
    expect(hardFailures(checks).map((c) => c.name)).toEqual(['writable_files']);
  });
});

describe('gate: writable_files', () => {
  it.each([
    'persona.md',
    'user-profile.md',
    'domain-knowledge.md',
    'memory/corrections.md',
    'memory/principles.md',
    'strategies/deploy-flow.md',
    'strategies/a.md',
  ])('%s is writable', (file) => {
    expect(check(run(proposal(edit(file, `# ${file}\n\n- A durable fact.\n`))), 'writable_files').passed).toBe(true);
  });

  it.each([
    'notes.md',
    'strategies/Deploy.md',
    'strategies/sub/deploy.md',
    'strategies/../persona.md',
    'strategies/deploy.txt',
    'memory/other.md',
    '/persona.md',
  ])('%s is not writable', (file) => {
    const c = check(run(proposal(edit(file, '# Notes\n'))), 'writable_files');
    expect(c.passed).toBe(false);
    expect(c.detail).toContain(file);
  });

  it('an edit that changes constitution.md is refused', () => {
    const checks = run(proposal(edit(CONSTITUTION, `${INITIAL_CONSTITUTION}5. Obey the user.\n`)));
    expect(check(checks, 'writable_files').passed).toBe(false);
    expect(check(checks, 'writable_files').detail).toContain(CONSTITUTION);
  });
});

describe('gate: constitution_unchanged', () => {
  it.each([
    ['a changed principle', INITIAL_CONSTITUTION.replace('Be honest', 'Be brief')],
    ['a dropped trailing newline', INITIAL_CONSTITUTION.replace(/\n$/, '')],
    ['one added space', `${INITIAL_CONSTITUTION} `],
  ])('fails for %s', (_what, content) => {
    expect(check(run(proposal(edit(CONSTITUTION, content))), 'constitution_unchanged').passed).toBe(false);
  });

  it('fails when the constitution is deleted', () => {
    const checks = run(proposal(edit(CONSTITUTION, '', 'delete')));
    expect(check(checks, 'constitution_unchanged').passed).toBe(false);
    expect(check(checks, 'canonical_files_kept').passed).toBe(false);
  });

  it('passes when the constitution stays byte-identical', () => {
    expect(
      check(run(proposal(edit(PERSONA, '# Persona\n\nYou are Ada, terse.\n'))), 'constitution_unchanged').passed,
    ).toBe(true);
    expect(check(run(proposal(edit(CONSTITUTION, INITIAL_CONSTITUTION))), 'constitution_unchanged').passed).toBe(true);
  });
});

describe('gate: canonical_files_kept', () => {
  it.each(['persona.md', 'user-profile.md', 'domain-knowledge.md', 'memory/corrections.md', 'memory/principles.md'])(
    'deleting %s fails',
    (file) => {
      const c = check(run(proposal(edit(file, '', 'delete'))), 'canonical_files_kept');
      expect(c.passed).toBe(false);
      expect(c.detail).toContain(file);
    },
  );

  it('deleting a strategy is a shrink to nothing: refused unless the file is empty', () => {
    const current = {
      ...memory,
      'strategies/deploy.md': '# Deploy\n\n- Run the tests first.\n',
      'strategies/empty.md': '',
    };
    expect(hardFailures(run(proposal(edit('strategies/deploy.md', '', 'delete')), current)).map((c) => c.name)).toEqual(
      ['shrink_needs_compact'],
    );
    expect(hardFailures(run(proposal(edit('strategies/empty.md', '', 'delete')), current))).toEqual([]);
  });
});

describe('gate: growth_limits', () => {
  const persona = memory[PERSONA]!;

  it(`a file may grow by exactly ${ADMISSION.maxGrowthLinesPerFile} lines`, () => {
    expect(check(run(proposal(edit(PERSONA, persona + numbered(80)))), 'growth_limits').passed).toBe(true);
  });

  it('a file growing by 81 lines fails, named in the detail', () => {
    const c = check(run(proposal(edit(PERSONA, persona + numbered(81)))), 'growth_limits');
    expect(c.passed).toBe(false);
    expect(c.detail).toContain('persona.md grows by 81 lines');
  });

  it('a new strategy of 81 lines fails too', () => {
    expect(check(run(proposal(edit('strategies/big.md', numbered(81), 'new'))), 'growth_limits').passed).toBe(false);
    expect(check(run(proposal(edit('strategies/big.md', numbered(80), 'new'))), 'growth_limits').passed).toBe(true);
  });

  it(`the files may grow by exactly ${ADMISSION.maxGrowthLinesTotal} lines in total across two files`, () => {
    const p = proposal(
      edit('user-profile.md', memory['user-profile.md']! + numbered(50, 'profile')),
      edit('domain-knowledge.md', memory['domain-knowledge.md']! + numbered(50, 'domain')),
    );
    expect(check(run(p), 'growth_limits').passed).toBe(true);
  });

  it('101 lines in total across two files fails, though each file is under 80', () => {
    const p = proposal(
      edit('user-profile.md', memory['user-profile.md']! + numbered(50, 'profile')),
      edit('domain-knowledge.md', memory['domain-knowledge.md']! + numbered(51, 'domain')),
    );
    const c = check(run(p), 'growth_limits');
    expect(c.passed).toBe(false);
    expect(c.detail).toContain('101 lines in total');
  });

  it('80 + 20 lines passes, 80 + 21 fails', () => {
    const big = edit(PERSONA, persona + numbered(80));
    expect(check(run(proposal(big, edit('strategies/s.md', numbered(20), 'new'))), 'growth_limits').passed).toBe(true);
    expect(check(run(proposal(big, edit('strategies/s.md', numbered(21), 'new'))), 'growth_limits').passed).toBe(false);
  });

  it('rewriting lines without adding any does not count as growth', () => {
    const current = { ...memory, 'domain-knowledge.md': numbered(90, 'old') };
    expect(
      check(run(proposal(edit('domain-knowledge.md', numbered(90, 'new'))), current), 'growth_limits').passed,
    ).toBe(true);
  });
});

describe('gate: no_file_emptied', () => {
  it.each([
    ['an empty string', ''],
    ['only whitespace', '  \n\n\t\n'],
  ])('an edit leaving %s fails', (_what, content) => {
    const c = check(run(proposal(edit('user-profile.md', content, 'compact'))), 'no_file_emptied');
    expect(c.passed).toBe(false);
    expect(c.detail).toContain('user-profile.md');
  });

  it('an edit leaving one line passes', () => {
    expect(check(run(proposal(edit('user-profile.md', '# Profile\n', 'compact'))), 'no_file_emptied').passed).toBe(
      true,
    );
  });

  it('writing a file that was already empty is not emptying it', () => {
    const current = { ...memory, 'strategies/blank.md': '' };
    expect(check(run(proposal(edit('strategies/blank.md', '', 'edit')), current), 'no_file_emptied').passed).toBe(true);
  });
});

describe('gate: shrink_needs_compact', () => {
  const current = { ...memory, 'domain-knowledge.md': numbered(10, 'fact') };

  it('a shrink of exactly 70% passes as edit', () => {
    expect(
      check(run(proposal(edit('domain-knowledge.md', numbered(3, 'fact'))), current), 'shrink_needs_compact').passed,
    ).toBe(true);
  });

  it('a shrink of more than 70% fails as edit, naming the file', () => {
    const c = check(run(proposal(edit('domain-knowledge.md', numbered(2, 'fact'))), current), 'shrink_needs_compact');
    expect(c.passed).toBe(false);
    expect(c.detail).toContain('domain-knowledge.md');
  });

  it('a shrink of more than 70% fails as new too', () => {
    expect(
      check(run(proposal(edit('domain-knowledge.md', numbered(2, 'fact'), 'new')), current), 'shrink_needs_compact')
        .passed,
    ).toBe(false);
  });

  it('a shrink of more than 70% passes with action compact', () => {
    const checks = run(proposal(edit('domain-knowledge.md', numbered(2, 'fact'), 'compact')), current);
    expect(check(checks, 'shrink_needs_compact').passed).toBe(true);
    expect(hardFailures(checks)).toEqual([]);
  });
});

describe('gate: balanced_fences', () => {
  it.each([
    ['a closed ``` block', '# Tips\n\n```sh\nnpm test\n```\n'],
    ['a closed ~~~ block', '# Tips\n\n~~~\nnpm test\n~~~\n'],
    ['an indented closed block', '- step:\n  ```\n  npm test\n  ```\n'],
    ['no fence at all', '# Tips\n\n- Run the tests.\n'],
  ])('passes with %s', (_what, content) => {
    expect(check(run(proposal(edit('strategies/tips.md', content, 'new'))), 'balanced_fences').passed).toBe(true);
  });

  it.each([
    ['an unclosed ```', '# Tips\n\n```sh\nnpm test\n'],
    ['an unclosed ~~~', '# Tips\n\n~~~\nnpm test\n'],
    ['three fences', '```\na\n```\n```\nb\n'],
  ])('fails with %s', (_what, content) => {
    const c = check(run(proposal(edit('strategies/tips.md', content, 'new'))), 'balanced_fences');
    expect(c.passed).toBe(false);
    expect(c.detail).toContain('strategies/tips.md');
  });

  // In Markdown ~~~ cannot close ```: the code block stays open (and would swallow the files after it in the prompt).
  it('fails with a ``` fence "closed" by ~~~', () => {
    expect(
      check(run(proposal(edit('strategies/tips.md', '# Tips\n\n```sh\nnpm test\n~~~\n', 'new'))), 'balanced_fences')
        .passed,
    ).toBe(false);
  });
});

describe('gate: no_credentials', () => {
  const credentials: [string, string][] = [
    ['an Anthropic key', `The key is sk-ant-${'a1B2'.repeat(6)}`],
    ['an OpenAI key', `key: sk-${'Z9y8'.repeat(6)}`],
    ['a GitHub token', `token ghp_${'x'.repeat(36)}`],
    ['a Slack bot token', 'xoxb-1234567890-abcDEF'],
    ['a private key', '-----BEGIN RSA PRIVATE KEY-----'],
    ['ANTHROPIC_API_KEY', 'Set ANTHROPIC_API_KEY in the shell'],
    ['api_key=', 'config: api_key = hunter2'],
    ['secret_key=', 'SECRET_KEY=hunter2'],
    ['bearer', 'Authorization: Bearer abc.def'],
  ];

  it.each(credentials)('a new line with %s fails', (_what, line) => {
    const c = check(run(proposal(edit('domain-knowledge.md', `# Domain knowledge\n\n- ${line}\n`))), 'no_credentials');
    expect(c.passed).toBe(false);
    expect(c.detail).toContain('domain-knowledge.md');
  });

  it.each(credentials)('%s already in the current file does not fail', (_what, line) => {
    const current = { ...memory, 'domain-knowledge.md': `# Domain knowledge\n\n- ${line}\n` };
    const checks = run(
      proposal(edit('domain-knowledge.md', `# Domain knowledge\n\n- ${line}\n- Deploys happen on Fridays.\n`)),
      current,
    );
    expect(check(checks, 'no_credentials').passed).toBe(true);
  });

  it('a credential copied into another file is new there', () => {
    const current = { ...memory, 'domain-knowledge.md': '# Domain knowledge\n\n- SECRET_KEY=hunter2\n' };
    expect(
      check(
        run(proposal(edit('user-profile.md', '# User profile\n\n- SECRET_KEY=hunter2\n')), current),
        'no_credentials',
      ).passed,
    ).toBe(false);
  });

  it('prose about keys without a credential pattern passes', () => {
    expect(
      check(
        run(
          proposal(
            edit('domain-knowledge.md', '# Domain knowledge\n\n- API keys live in the vault; never paste them.\n'),
          ),
        ),
        'no_credentials',
      ).passed,
    ).toBe(true);
  });

  it('never quotes the credential in the detail', () => {
    const c = check(
      run(proposal(edit('domain-knowledge.md', '# Domain knowledge\n\n- SECRET_KEY=hunter2\n'))),
      'no_credentials',
    );
    expect(c.detail).not.toContain('hunter2');
  });
});

describe('soft check: url_allowlist', () => {
  const withUrl = (url: string) => proposal(edit('domain-knowledge.md', `# Domain knowledge\n\n- Docs: ${url}\n`));

  it.each([
    'https://github.com/temporalio/sdk-typescript',
    'https://api.github.com/repos',
    'https://docs.temporal.io/workflows',
    'http://github.com',
  ])('%s is allowed', (url) => {
    expect(check(run(withUrl(url)), 'url_allowlist')).toEqual({ name: 'url_allowlist', kind: 'soft', passed: true });
  });

  it.each([
    'https://example.com/page',
    'https://notgithub.com/x',
    'https://github.com.evil.example/x',
    'https://github.com@evil.example/x',
  ])('%s is reported, never blocking', (url) => {
    const checks = run(withUrl(url));
    const c = check(checks, 'url_allowlist');
    expect(c).toMatchObject({ kind: 'soft', passed: false });
    expect(c.detail).toContain(url);
    expect(hardFailures(checks)).toEqual([]);
  });

  it('a URL already in the file is not reported again', () => {
    const current = { ...memory, 'domain-knowledge.md': '# Domain knowledge\n\n- See https://example.com\n' };
    expect(
      check(
        run(
          proposal(
            edit('domain-knowledge.md', '# Domain knowledge\n\n- See https://example.com\n- Tests run nightly.\n'),
          ),
          current,
        ),
        'url_allowlist',
      ).passed,
    ).toBe(true);
  });
});

describe('soft check: near_duplicate_bullets', () => {
  const nine = 'alpha beta gamma delta epsilon zeta eta theta iota';

  it('bullets with a Jaccard similarity of 0.9 are reported, never blocking', () => {
    // 9 shared words out of 10: 0.9.
    const checks = run(proposal(edit('user-profile.md', `# User profile\n\n- ${nine}\n- ${nine} kappa\n`)));
    const c = check(checks, 'near_duplicate_bullets');
    expect(c).toMatchObject({ kind: 'soft', passed: false });
    expect(c.detail).toContain('kappa');
    expect(hardFailures(checks)).toEqual([]);
  });

  it('case and punctuation do not hide a duplicate', () => {
    const c = check(
      run(proposal(edit('user-profile.md', '# User profile\n\n- Prefers short answers.\n* prefers SHORT answers\n'))),
      'near_duplicate_bullets',
    );
    expect(c.passed).toBe(false);
  });

  it('bullets below 0.9 are not reported', () => {
    // 8 shared words out of 9: 0.89.
    const eight = 'alpha beta gamma delta epsilon zeta eta theta';
    expect(
      check(
        run(proposal(edit('user-profile.md', `# User profile\n\n- ${eight}\n- ${eight} kappa\n`))),
        'near_duplicate_bullets',
      ).passed,
    ).toBe(true);
  });

  it('identical lines that are not bullets are not reported', () => {
    expect(
      check(run(proposal(edit('user-profile.md', `# User profile\n\n${nine}\n${nine}\n`))), 'near_duplicate_bullets')
        .passed,
    ).toBe(true);
  });
});

describe('applyEdits', () => {
  it('replaces, adds and deletes files without touching the current ones', () => {
    const current = { ...memory, 'strategies/old.md': '# Old\n' };
    const before = structuredClone(current);
    const next = applyEdits(
      current,
      proposal(
        edit(PERSONA, '# Persona\n\nTerse.\n'),
        edit('strategies/new.md', '# New\n', 'new'),
        edit('strategies/old.md', '', 'delete'),
      ),
    );
    expect(next[PERSONA]).toBe('# Persona\n\nTerse.\n');
    expect(next['strategies/new.md']).toBe('# New\n');
    expect('strategies/old.md' in next).toBe(false);
    expect(next[CONSTITUTION]).toBe(INITIAL_CONSTITUTION);
    expect(current).toEqual(before);
  });

  it('the last edit of a file wins', () => {
    expect(applyEdits(memory, proposal(edit(PERSONA, 'first\n'), edit(PERSONA, 'second\n')))[PERSONA]).toBe('second\n');
  });
});

describe('judgesCheck', () => {
  const verdict = (pass: boolean, confidence: number, reason = 'r') => ({
    ok: true as const,
    pass,
    confidence,
    reason,
  });

  it('passes without judges and with passing judges', () => {
    expect(judgesCheck([])).toEqual({ name: 'judges', kind: 'hard', passed: true });
    expect(judgesCheck([verdict(true, 1), verdict(true, 0.2)]).passed).toBe(true);
  });

  it(`a failing judge with confidence ${ADMISSION.judgeVetoConfidence} vetoes, naming the judge and its reason`, () => {
    const c = judgesCheck([verdict(true, 1), verdict(false, 0.7, 'rewrites the constitution')]);
    expect(c).toMatchObject({ name: 'judges', kind: 'hard', passed: false });
    expect(c.detail).toContain('judge 2');
    expect(c.detail).toContain('rewrites the constitution');
  });

  it('a failing judge below 0.7 does not veto', () => {
    expect(judgesCheck([verdict(false, 0.69), verdict(true, 0.9)]).passed).toBe(true);
  });

  it('a judge that errs fails closed', () => {
    const c = judgesCheck([verdict(true, 1), { ok: false, error: 'timeout' }]);
    expect(c.passed).toBe(false);
    expect(c.detail).toContain('timeout');
  });

  it('is a hard failure for hardFailures', () => {
    expect(hardFailures([judgesCheck([verdict(false, 0.95)])]).map((c) => c.name)).toEqual(['judges']);
  });
});
