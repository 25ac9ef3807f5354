import { describe, expect, it } from 'vitest';
import type { DelegateFinished } from '../../domain/delegation';
import { admissionDecision, type OutcomeRow } from '../../domain/outcome-admission';

const claim: DelegateFinished = {
  delegateId: 'd1',
  outcomeVersion: 1,
  transcriptVersion: 1,
  outcomeKind: 'success',
  terminalOwner: 'delegate',
};
const row: OutcomeRow = {
  conversationKey: 'conv',
  committed: true,
  outcomeKind: 'success',
  outcomeVersion: 1,
  transcriptVersion: 1,
  terminalOwner: 'delegate',
  admittedVersion: 0,
};

describe('admission of a delegate outcome', () => {
  it('admits a committed outcome whose four fields match the row', () => {
    expect(admissionDecision('conv', claim, row)).toBe('admitted');
  });

  it.each([
    ['no row', undefined, 'rejected:unknown'],
    ['a row of another conversation', { ...row, conversationKey: 'other' }, 'rejected:other_conversation'],
    ['an outcome not yet committed', { ...row, committed: false }, 'rejected:not_committed'],
    ['a version already admitted', { ...row, admittedVersion: 1 }, 'ignored:consumed'],
    ['another outcome kind', { ...row, outcomeKind: 'failed' as const }, 'rejected:mismatch'],
    ['another transcript version', { ...row, transcriptVersion: 0 }, 'rejected:mismatch'],
    ['another terminal owner', { ...row, terminalOwner: 'cancel' as const }, 'rejected:mismatch'],
  ])('%s', (_what, r, decision) => {
    expect(admissionDecision('conv', claim, r)).toBe(decision);
  });

  it('checks the conversation before the commit, and the commit before consumption', () => {
    expect(admissionDecision('conv', claim, { ...row, conversationKey: 'other', committed: false })).toBe(
      'rejected:other_conversation',
    );
    expect(admissionDecision('conv', claim, { ...row, committed: false, admittedVersion: 1 })).toBe(
      'rejected:not_committed',
    );
  });
});
