import {
  ActivityCancellationType,
  CancellationScope,
  condition,
  proxyActivities,
  proxyLocalActivities,
} from '@temporalio/workflow';
import type { KeelActivities } from '../activities';
import { NON_RETRYABLE_MODEL_FAILURES } from '../domain/failures';
import { TOOL_CALLS } from '../domain/tool-calls';

/**
 * The retry policies of Keel's activities, named for what they protect. Database steps retry without limit: an
 * outage of PostgreSQL is waited out, never turned into lost work.
 */
export const store = proxyActivities<KeelActivities>({
  // Short enough that a step held by a killed worker is retried elsewhere soon (they do not heartbeat).
  startToCloseTimeout: '10 seconds',
  retry: { initialInterval: '500 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

/**
 * The same short PostgreSQL steps as local activities, for runs begun before the conversation's and the job run's
 * patches that retired them (NO_LOCAL_STEPS_PATCH, JOB_TURN_DEADLINE_PATCH). A local activity that outlives its
 * workflow task resolves in an activation of its own in the live run but beside other resolutions on replay, so a
 * coroutine running beside it (an update handler) may emit its commands in another order on replay: a workflow with
 * handlers must not use them. Retried without limit; past the local threshold each retry waits on a durable timer.
 */
export const steps = proxyLocalActivities<KeelActivities>({
  startToCloseTimeout: '10 seconds',
  localRetryThreshold: '10 seconds',
  retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
});

/** A model call's retries: provider failures back off (or wait out Retry-After); request errors do not retry. */
export const MODEL_CALL_RETRY = {
  initialInterval: '1 second',
  backoffCoefficient: 2,
  maximumInterval: '1 minute',
  maximumAttempts: 10,
  nonRetryableErrorTypes: NON_RETRYABLE_MODEL_FAILURES,
};

/** Model calls of turns and delegates. */
export const model = proxyActivities<KeelActivities>({
  startToCloseTimeout: '10 minutes',
  // The model activity heartbeats while it streams (at most every second); a dead worker is noticed within this.
  heartbeatTimeout: '5 seconds',
  // An interrupt waits for the activity to keep its partial text before the turn moves on.
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
  retry: MODEL_CALL_RETRY,
});

/** Deliveries count their own send attempts in the effects ledger; Temporal retries until the ledger says done. */
export const delivery = proxyActivities<KeelActivities>({
  // One send per attempt (the transports time out at 10 s); it heartbeats while it sends, so a delivery held by a
  // killed worker is retried after the heartbeat timeout.
  startToCloseTimeout: '20 seconds',
  heartbeatTimeout: '5 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/**
 * Calls of tool servers' tools. The step itself decides what a retry may do (services/tool-calls.ts): a call never
 * sent, or one whose tool says a repeat is harmless, is sent again; any other call found sent is not.
 */
export const tools = proxyActivities<KeelActivities>({
  // A call's own timeout (TOOL_CALLS.callTimeoutMs) and a connection's, with room to record the end.
  startToCloseTimeout: '2 minutes',
  heartbeatTimeout: '10 seconds',
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '30 seconds',
    maximumAttempts: TOOL_CALLS.attempts,
  },
});

/** One activity as a turn calls it: plainly, or with options of its own (a summary for the Temporal UI). */
type TurnStep<F> = F extends (...args: infer A) => infer R
  ? ((...args: A) => R) & { executeWithOptions(options: { summary?: string }, args: A): R }
  : never;

/** Keel's activities as a turn takes them: ordinary activities, or local ones (TURN_IN_ONE_TASK_PATCH). */
export type Steps = { [K in keyof KeelActivities]: TurnStep<KeelActivities[K]> };

/** The proxies a turn runs its steps through, by what each protects. */
export interface TurnSteps {
  /** Whether these are local activities: a turn in one workflow task, which also takes fewer, larger steps. */
  local: boolean;
  store: Steps;
  model: Steps;
  delivery: Steps;
  tools: Steps;
}

/** A turn of ordinary activities: delegates, and conversations begun before TURN_IN_ONE_TASK_PATCH. */
export const activitySteps: TurnSteps = { local: false, store, model, delivery, tools };

/**
 * A turn's steps as local activities, so that a whole turn runs in one workflow task, with no round trip to the
 * Temporal server between its steps. Each still commits before it returns (its PostgreSQL row, the effects ledger):
 * a workflow task lost with a killed worker runs them again, and they answer what they committed.
 */
export const localSteps: TurnSteps = {
  local: true,
  store: afterEachHandlersFirst(steps),
  model: afterEachHandlersFirst(
    proxyLocalActivities<KeelActivities>({
      startToCloseTimeout: '10 minutes',
      cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
      retry: MODEL_CALL_RETRY,
    }),
  ),
  delivery: afterEachHandlersFirst(
    proxyLocalActivities<KeelActivities>({
      startToCloseTimeout: '20 seconds',
      localRetryThreshold: '10 seconds',
      retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
    }),
  ),
  tools: afterEachHandlersFirst(
    proxyLocalActivities<KeelActivities>({
      startToCloseTimeout: '2 minutes',
      localRetryThreshold: '10 seconds',
      retry: {
        initialInterval: '1 second',
        backoffCoefficient: 2,
        maximumInterval: '30 seconds',
        maximumAttempts: TOOL_CALLS.attempts,
      },
    }),
  ),
};

/**
 * A job's run in one local step (services/job-run-at-once.ts): it holds the turn's model call, so the model's
 * timeout; it fails only when PostgreSQL does (a failed call or send is left to the workflow), so it retries without
 * limit, as the store's steps do.
 */
export const jobRunAtOnce = afterEachHandlersFirst(
  proxyLocalActivities<KeelActivities>({
    startToCloseTimeout: '10 minutes',
    localRetryThreshold: '10 seconds',
    retry: { initialInterval: '200 milliseconds', backoffCoefficient: 2, maximumInterval: '10 seconds' },
  }),
);

/** Resolves once the handlers of the current activation have run to their end (see afterEachHandlersFirst). */
export async function letHandlersFinish(): Promise<void> {
  await CancellationScope.nonCancellable(async () => {
    let handlersRan = false;
    const later = condition(() => handlersRan);
    handlersRan = true;
    await later;
  });
}

/**
 * Local activities whose caller, once one resolves, goes on only after the handlers of the same activation have
 * finished (issue 24's lesson). A local activity that outlives its workflow task resolves in an activation of its own
 * live, but beside the Updates of the next task on replay, where the SDK resolves it last. The caller's next command
 * must then still come after what those handlers emit (an Update's completion), whatever the count of promise hops on
 * either side: a condition that is false when it is made is evaluated only once the activation's microtasks have
 * run. Handlers of a workflow that uses these must therefore be synchronous: they emit no command of their own.
 */
function afterEachHandlersFirst(acts: Steps): Steps {
  const settled = async <R>(run: () => Promise<R>): Promise<R> => {
    try {
      return await run();
    } finally {
      await letHandlersFinish();
    }
  };
  return new Proxy(acts, {
    get(target, name, receiver) {
      const step: unknown = Reflect.get(target, name, receiver);
      if (typeof step !== 'function') return step;
      const call = step as (...args: unknown[]) => Promise<unknown>;
      const { executeWithOptions } = step as unknown as {
        executeWithOptions: (o: unknown, a: unknown[]) => Promise<unknown>;
      };
      return Object.assign((...args: unknown[]) => settled(() => call(...args)), {
        executeWithOptions: (options: unknown, args: unknown[]) => settled(() => executeWithOptions(options, args)),
      });
    },
  });
}
