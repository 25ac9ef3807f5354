import { Context } from '@temporalio/activity';

/**
 * What a service needs of the step it runs in: its attempt, heartbeat, cancellation and a sleep that cancellation
 * ends. An activity passes its own (currentStep); the routine sandbox's capability host, which runs outside the
 * activity's async context, passes the one it captured.
 */
export interface Step {
  /** 1 for the first try, 2 for Temporal's first retry, … */
  attempt: number;
  heartbeat(details?: unknown): void;
  signal: AbortSignal;
  /** Whether the step was cancelled on request (a newer message), rather than by a timeout or a shutdown. */
  cancelRequested(): boolean;
  sleep(ms: number): Promise<void>;
}

/** The running activity, as a step. */
export function currentStep(): Step {
  const ctx = Context.current();
  return {
    attempt: ctx.info.attempt,
    heartbeat: (details) => ctx.heartbeat(details),
    signal: ctx.cancellationSignal,
    cancelRequested: () => ctx.cancellationDetails?.cancelRequested ?? false,
    sleep: (ms) => ctx.sleep(ms),
  };
}

/**
 * Heartbeats every `everyMs` while `work` runs, so that a worker killed meanwhile is noticed within the activity's
 * heartbeat timeout instead of its start-to-close timeout. Heartbeats also carry cancellation to the activity.
 */
export async function heartbeatWhile<T>(work: Promise<T>, heartbeat: () => void, everyMs = 1_000): Promise<T> {
  const beat = setInterval(heartbeat, everyMs);
  try {
    return await work;
  } finally {
    clearInterval(beat);
  }
}

/** A module's steps `(deps, input) => …`, each bound to the worker's dependencies: its activities. */
export type BoundSteps<M> = {
  [K in keyof M as M[K] extends (deps: never, input: never) => unknown ? K : never]: M[K] extends (
    deps: never,
    input: infer I,
  ) => infer R
    ? (input: I) => R
    : never;
};

/**
 * The activities of a module of steps (services/delegation.ts, say): every function it exports takes the worker's
 * dependencies and the activity's input, so each activity is its step with `deps` bound and nothing else.
 */
export function bindSteps<D, M extends Record<string, unknown>>(deps: D, steps: M): BoundSteps<M> {
  const bound = Object.entries(steps).flatMap(([name, step]) =>
    typeof step === 'function'
      ? [[name, (input: unknown) => (step as (d: D, i: unknown) => unknown)(deps, input)]]
      : [],
  );
  return Object.fromEntries(bound) as BoundSteps<M>;
}
