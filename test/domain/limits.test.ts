import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../domain/config';
import { JOBS, validateNewJob, type NewJob } from '../../domain/jobs';
import { LIMITS } from '../../domain/limits';
import { checkRoutineSchedule, DEFAULT_ROUTINE_SETTINGS } from '../../domain/routines';

/**
 * The numbers other tests read from the code's own constants, pinned here with their literal values: a changed
 * constant would carry those tests along with it, and fails here instead. Behaviour with the literal where it is
 * cheap (test/limits.test.ts has the turn and the delivery); the value itself otherwise.
 */
describe('limits pinned to their literal values', () => {
  it('a turn makes at most 5 model calls; a delivery makes at most 6 send attempts', () => {
    expect(LIMITS.modelCallsPerTurn).toBe(5);
    expect(LIMITS.deliveryAttempts).toBe(6);
  });

  it('routine defaults: 15 min floor, 8 s smoke run, 120 s run, 64 MB, 7 days of approval wait', () => {
    const expected = {
      floorMs: 900_000,
      smokeLimitMs: 8_000,
      runLimitMs: 120_000,
      memoryLimitMb: 64,
      approvalWaitMs: 604_800_000,
      integrations: {},
    };
    expect(DEFAULT_ROUTINE_SETTINGS).toEqual(expected);
    // What a deployment gets with no KEEL_ROUTINE_* variable set.
    expect(loadConfig({}).routines).toEqual(expected);
  });

  it('the routine floor by behaviour: fires 14 minutes apart are refused, 15 minutes apart accepted', () => {
    const now = new Date('2026-06-01T12:00:00Z');
    const refused = { ok: false, error: 'fires must be at least 15 minutes apart' };
    expect(checkRoutineSchedule('*/14 * * * *', 'UTC', now)).toEqual(refused);
    expect(checkRoutineSchedule('*/15 * * * *', 'UTC', now)).toMatchObject({ ok: true });
    expect(checkRoutineSchedule('*/14 * * * *', 'UTC', now, DEFAULT_ROUTINE_SETTINGS.floorMs)).toEqual(refused);
  });

  it("a job's task is at most 32,768 UTF-8 bytes, by value and by behaviour", () => {
    expect(JOBS.taskBytes).toBe(32_768);
    const ctx = { now: new Date('2026-06-01T12:00:00Z'), existingJobs: 0, nameTaken: false };
    const job = (task: string): NewJob => ({ name: 'digest', task, schedule: { kind: 'every', intervalMs: 60_000 } });
    expect(validateNewJob(job('x'.repeat(32_768)), ctx).ok).toBe(true);
    const tooLarge = { ok: false, error: { code: 'task_too_large', status: 413 } };
    expect(validateNewJob(job('x'.repeat(32_769)), ctx)).toMatchObject(tooLarge);
  });
});
