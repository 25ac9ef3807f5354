import { DefaultLogger, type LogEntry, type LogLevel, type LogMetadata, type Logger } from '@temporalio/worker';
import pino from 'pino';

const LEVELS: Record<LogLevel, pino.Level> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/**
 * The SDK's own account of the worker's life (its state changes, which pollers it starts) is debug detail: at info a
 * terminal shows what Keel did, and npm start's banner stays the last thing it prints while starting.
 */
const levelOf = (entry: LogEntry): pino.Level =>
  entry.level === 'INFO' && entry.meta?.sdkComponent === 'worker' ? 'debug' : LEVELS[entry.level];

/**
 * The worker's log: one JSON line per entry (pino). The SDK's workflow and activity loggers add their context to
 * each entry's meta (workflowId, runId, workflowType, activityType, …), so a line of a turn names its workflow.
 */
export function workerLogger(level: string, destination: pino.DestinationStream = pino.destination(1)): DefaultLogger {
  const log = pino({ level: level.toLowerCase(), base: { service: 'keel-worker' } }, destination);
  const threshold = (Object.keys(LEVELS) as LogLevel[]).find((l) => LEVELS[l] === log.level) ?? 'INFO';
  return new DefaultLogger(threshold, (entry: LogEntry) => {
    const { meta, message } = entry;
    log[levelOf(entry)]({ ...meta }, message);
  });
}

/** A failed workflow task, as the SDK's core logs it: the run, and the failure in core's rendering. */
export interface FailedWorkflowTask {
  runId: string;
  failure: string;
}

const failedTaskListeners = new Set<(failed: FailedWorkflowTask) => void>();

/** Calls `listener` for every workflow task a worker of this process fails; answers the unsubscribe. */
export function onFailedWorkflowTask(listener: (failed: FailedWorkflowTask) => void): () => void {
  failedTaskListeners.add(listener);
  return () => failedTaskListeners.delete(listener);
}

/** Core's logs, forwarded to the Runtime's logger from WARN up (a failed workflow task is a WARN). */
export const FORWARD_CORE_LOGS = { forward: {}, filter: { core: 'WARN', other: 'ERROR' } } as const;

/**
 * The Runtime's logger, tapped: core's "Failing workflow task" entries reach the failed-task listeners whatever the
 * log level, and every entry goes on to `inner`.
 */
export function tapFailedWorkflowTasks(inner: Logger): Logger {
  const tap = (message: string, meta?: LogMetadata) => {
    if (!message.startsWith('Failing workflow task') || typeof meta?.runId !== 'string') return;
    const failed = { runId: meta.runId, failure: typeof meta.failure === 'string' ? meta.failure : '' };
    for (const listener of failedTaskListeners) listener(failed);
  };
  return {
    log: (level, message, meta) => {
      tap(message, meta);
      inner.log(level, message, meta);
    },
    trace: (message, meta) => {
      inner.trace(message, meta);
    },
    debug: (message, meta) => {
      inner.debug(message, meta);
    },
    info: (message, meta) => {
      inner.info(message, meta);
    },
    warn: (message, meta) => {
      tap(message, meta);
      inner.warn(message, meta);
    },
    error: (message, meta) => {
      inner.error(message, meta);
    },
  };
}
