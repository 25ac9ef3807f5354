import pino from 'pino';
import pretty from 'pino-pretty';

/**
 * Where the worker's and the API's logs go: readable lines in a terminal (pino-pretty), one JSON object per line
 * when stdout is a pipe or a file, for whatever collects them.
 */
export function logOutput(): pino.DestinationStream {
  if (!process.stdout.isTTY) return pino.destination(1);
  return pretty({ destination: 1, sync: true, translateTime: 'SYS:HH:MM:ss', ignore: 'pid,hostname' });
}
