import { DefaultLogger, type LogEntry, type LogLevel } from '@temporalio/worker';
import pino from 'pino';

const LEVELS: Record<LogLevel, pino.Level> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/**
 * The worker's log: one JSON line per entry (pino). The SDK's workflow and activity loggers add their context to
 * each entry's meta (workflowId, runId, workflowType, activityType, …), so a line of a turn names its workflow.
 */
export function workerLogger(level: string, destination: pino.DestinationStream = pino.destination(1)): DefaultLogger {
  const log = pino({ level: level.toLowerCase(), base: { service: 'keel-worker' } }, destination);
  const threshold = (Object.keys(LEVELS) as LogLevel[]).find((l) => LEVELS[l] === log.level) ?? 'INFO';
  return new DefaultLogger(threshold, (entry: LogEntry) => {
    const { meta, message } = entry;
    log[LEVELS[entry.level]]({ ...meta }, message);
  });
}
