import { describe, expect, it } from 'vitest';
import {
  caseResult,
  candidateTools,
  failedChecks,
  judgeVerdict,
  lineDiff,
  requestDivergence,
  serversUnderCandidate,
  type EvalCase,
  type EvalTurnResult,
} from '../../domain/evals';
import type { ModelRequest } from '../../domain/model';
import type { PinnedTool, ToolPolicy } from '../../domain/tool-servers';

const turn = (t: Partial<EvalTurnResult> & { turn: number }): EvalTurnResult => ({
  rows: [],
  outcome: 'replied',
  reply: null,
  guard: [],
  toolCalls: [],
  modelCalls: 0,
  costUsd: 0,
  latencyMs: 0,
  ...t,
});

const request = (r: Partial<ModelRequest> = {}): ModelRequest => ({
  model: 'm',
  system: 'one\ntwo\nthree',
  messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }] }],
  tools: [{ name: 'reply', description: 'd', input_schema: {} }],
  maxTokens: 10,
  ...r,
});

describe('requestDivergence', () => {
  it('names the first differing part: model, then system, then tools, then messages', () => {
    expect(requestDivergence(request(), request())).toBeUndefined();
    expect(requestDivergence(request(), request({ model: 'n', system: 'x' }))).toEqual({
      part: 'model',
      diff: '- m\n+ n',
    });
    expect(requestDivergence(request(), request({ system: 'one\nTWO\nthree' }))).toEqual({
      part: 'system',
      diff: '  one\n- two\n+ TWO',
    });
    expect(requestDivergence(request(), request({ tools: [] }))).toEqual({ part: 'tools', diff: '- reply' });
    const other = request({ messages: [{ role: 'user', content: [{ type: 'text', text: 'ho' }] }] });
    expect(requestDivergence(request(), other)?.part).toBe('messages');
  });
});

describe('lineDiff', () => {
  it('cuts the common start and end and keeps a line of context', () => {
    expect(lineDiff('a\nb\nc\nd', 'a\nb\nX\nd')).toBe('  b\n- c\n+ X');
    expect(lineDiff('a', 'a\nb')).toBe('  a\n+ b');
  });
  it('cuts a diff past 4,000 characters, saying so', () => {
    const diff = lineDiff('', 'x'.repeat(5_000));
    expect(diff.endsWith('\n[… the diff is cut]')).toBe(true);
    expect(diff.length).toBe(4_000 + '\n[… the diff is cut]'.length);
  });
});

describe('failedChecks', () => {
  const turns = [
    turn({
      turn: 1,
      reply: 'order A1: shipped',
      guard: [{ verdict: 'passed' }],
      costUsd: 0.01,
      toolCalls: [{ name: 'shop__lookup', arguments: { id: 'A1', x: 1 }, answeredBy: 'recording', isError: false }],
    }),
    turn({ turn: 2, outcome: 'skipped', costUsd: 0.02 }),
  ];

  it('passes checks that hold', () => {
    expect(
      failedChecks(
        [
          { replyContains: 'shipped', turn: 1 },
          { replyMatches: '^order A\\d' },
          { toolCalled: 'shop__lookup', arguments: { id: 'A1' } },
          { toolNotCalled: 'shop__refund' },
          { outcome: 'skipped', turn: 2 },
          { guard: 'passed' },
          { costUsdAtMost: 0.03 },
          { turnsAtMost: 2 },
        ],
        turns,
      ),
    ).toEqual([]);
  });

  it('says why each failing check fails', () => {
    expect(
      failedChecks(
        [
          { replyContains: 'shipped', turn: 2 },
          { replyMatches: '^refund' },
          { toolCalled: 'shop__lookup', arguments: { id: 'B2' } },
          { toolNotCalled: 'shop__lookup' },
          { outcome: 'replied', turn: 2 },
          { guard: 'blocked' },
          { costUsdAtMost: 0.025 },
          { turnsAtMost: 1 },
          { judge: { rubric: 'r' } },
        ],
        turns,
      ),
    ).toEqual([
      'no reply of turn 2 contains "shipped"',
      'no reply of any turn matches /^refund/',
      'shop__lookup was not called with {"id":"B2"}',
      'shop__lookup was called',
      'no turn of turn 2 ended replied (skipped)',
      'the reply guard blocked no reply of any turn',
      'it cost $0.030000, over $0.025',
      'it took 2 turns, over 1',
      'the judge gave no verdict',
    ]);
  });

  it('does not count a denied call as called', () => {
    const denied = [turn({ turn: 1, toolCalls: [{ name: 't', arguments: {}, answeredBy: 'denied', isError: true }] })];
    expect(failedChecks([{ toolCalled: 't' }], denied)).toEqual(['t was not called']);
  });
});

describe('judgeVerdict', () => {
  it.each([
    ['PASS: says it shipped', { passed: true, reason: 'says it shipped' }],
    ['fail - it did not', { passed: false, reason: 'it did not' }],
    ['PASS', { passed: true, reason: 'PASS' }],
    ['Maybe', { passed: false, reason: 'the judge answered neither PASS nor FAIL: Maybe' }],
  ])('%s', (text, verdict) => expect(judgeVerdict(text)).toEqual(verdict));
});

describe('caseResult', () => {
  it('fails a recorded turn that ended otherwise, with the tool-call diff', () => {
    const c: EvalCase = {
      id: 'c',
      source: 'recorded',
      history: [],
      toolResults: [],
      checks: [],
      turns: [
        {
          inputs: [],
          recorded: {
            turnId: 't1',
            answers: [[{ type: 'tool_use', id: 'u1', name: 'shop__lookup', input: { id: 'A1' } }]],
            results: {},
            costsUsd: [0.5],
            models: ['m'],
            outcome: 'replied',
            reply: 'ok',
            serverTools: [],
            rows: [],
          },
        },
      ],
    };
    const result = caseResult(c, [turn({ turn: 1, outcome: 'budget_exhausted', costUsd: 0.25 })]);
    expect(result).toMatchObject({
      passed: false,
      reasons: ['turn 1: ended budget_exhausted where the recording replied'],
      changedTurns: [1],
      toolCallDiff: [{ turn: 1, added: [], removed: ['shop__lookup {"id":"A1"}'] }],
      costUsd: 0.25,
    });
  });
});

describe('a candidate over tool servers', () => {
  const tool = (server: string, name: string, policy: PinnedTool['policy']): PinnedTool => ({
    name,
    description: '',
    inputSchema: {},
    annotations: {},
    modelName: `${server}__${name}`,
    policy,
    server,
    serverVersion: 1,
  });

  it("offers only the candidate's servers, under its policies, without the denied", () => {
    const tools = [tool('shop', 'lookup', 'auto'), tool('shop', 'refund', 'approve'), tool('fs', 'read', 'auto')];
    const offered = candidateTools(tools, {
      toolServers: ['shop'],
      toolPolicies: { shop__lookup: 'approve', shop__refund: 'deny' },
    });
    expect(offered.map((t) => [t.modelName, t.policy])).toEqual([['shop__lookup', 'approve']]);
  });

  it("sets a fork's servers' policies by their tools' model names", () => {
    const servers: { name: string; enabled: boolean; policies: Record<string, ToolPolicy> }[] = [
      { name: 'shop', enabled: true, policies: { refund: 'approve' } },
      { name: 'fs', enabled: true, policies: {} },
    ];
    expect(serversUnderCandidate(servers, { toolServers: ['shop'], toolPolicies: { shop__refund: 'deny' } })).toEqual([
      { name: 'shop', enabled: true, policies: { refund: 'deny' } },
      { name: 'fs', enabled: false, policies: {} },
    ]);
  });
});
