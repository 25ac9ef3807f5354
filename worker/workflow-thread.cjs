'use strict';
/**
 * Preloaded (`node --require`) into every Keel worker process, and so into the SDK's workflow thread, which runs no
 * other code of Keel's: scripts/processes.ts `WORKER_NODE_FLAGS`, package.json's `worker` script.
 *
 * In that thread it turns off the SDK's per-promise stack capture, which backs the `__stack_trace` query (the Temporal
 * UI's Stack Trace tab). For every promise a workflow makes, the SDK compiles two functions, captures a stack and
 * maps each frame through the bundle's source map: about 1.8 ms of the worker's 12 ms of CPU per turn
 * (bench/CHANGES-TRIED.md). No worker option turns it off; the SDK treats the query as optional (it is off where
 * promise hooks are missing) and answers it with "Workflow stack traces are not enabled on this worker".
 * KEEL_WORKFLOW_STACK_TRACES=on keeps it, for debugging a workflow that waits where its history does not say why.
 *
 * Plain CommonJS because `--require` runs before tsx is registered, and in worker threads, which `--import` does not.
 */
const { isMainThread } = require('node:worker_threads');

if (!isMainThread && process.env.KEEL_WORKFLOW_STACK_TRACES !== 'on') {
  try {
    const { globalHandlers } = require('@temporalio/worker/lib/workflow/vm-shared');
    // install() sets the hook once per thread, when the thread's workflow context is created; this runs before it.
    globalHandlers.setPromiseHook = () => undefined;
  } catch (err) {
    // An SDK that moved its internals still runs workflows, at the cost this saves (and
    // test/workflow-stack-traces.test.ts fails).
    const why = err instanceof Error ? err.message : String(err);
    console.warn(`keel: the workflow thread keeps the SDK's stack capture: ${why}`);
  }
}
