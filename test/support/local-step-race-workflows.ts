// The smallest shape of issue 24's nondeterminism, in two variants that differ only in how the main loop's first step
// runs: an update handler records its message with an activity (behind a mutex, as the conversation's does) while the
// main loop takes its first step, then schedules an activity. test/local-step-replay.test.ts runs both.
import { condition, defineUpdate, proxyActivities, proxyLocalActivities, setHandler } from '@temporalio/workflow';
import { Mutex } from 'async-mutex';
import type { raceActivities } from './local-step-race-activities';
import { letHandlersFinish } from '../../workflows/activities';

type Activities = typeof raceActivities;
const activity = proxyActivities<Activities>({ startToCloseTimeout: '10 seconds' });
const local = proxyLocalActivities<Activities>({ startToCloseTimeout: '2 minutes' });

export const raceSubmit = defineUpdate<string, [string]>('submit');

async function race(firstStep: () => Promise<void>): Promise<void> {
  const queue: string[] = [];
  const accepting = new Mutex();
  setHandler(raceSubmit, (m) =>
    accepting.runExclusive(async () => {
      await activity.acceptStep(m);
      queue.push(m);
      return m;
    }),
  );
  await firstStep();
  await activity.nextStep('after the first step');
  await condition(() => queue.length > 0);
}

/** The first step as a local activity: the shape conversations had before NO_LOCAL_STEPS_PATCH. */
export async function raceWithLocalStep(): Promise<void> {
  await race(() => local.firstStep());
}

/** The first step as an ordinary activity: the shape conversations had from issue 24 to the turn in one task. */
export async function raceWithActivityStep(): Promise<void> {
  await race(() => activity.firstStep());
}

/**
 * The shape of a turn in one workflow task: a synchronous handler, and a local step after which the loop lets the
 * activation's handlers finish before its next command (workflows/activities.ts).
 */
export async function raceWithSyncHandler(): Promise<void> {
  const queue: string[] = [];
  setHandler(raceSubmit, (m) => {
    queue.push(m);
    return m;
  });
  await local.slowStep();
  await letHandlersFinish();
  await activity.nextStep('after the slow step');
  await condition(() => queue.length > 0);
}
