/**
 * npm run replay -- <workflowId> [--run-id R]
 * npm run replay -- --query '<visibility query>'
 * npm run replay -- --file <history.json> [--workflow-id W]
 *
 * Replays histories against the current workflow code (KEEL_WORKFLOWS_PATH overrides which code) and prints one line
 * per history; exits 1 when any replay fails (a determinism error names the command that no longer matches), 2 when
 * nothing was found.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { loadConfig } from '../domain/config';
import { replayHistories } from '../services/replay';
import { decodePayloadsIn, fetchHistory, historyJson, queryHistories, type HistoryRef } from '../services/run-history';
import { payloadEncryption } from '../services/payload-encryption';
import { WORKFLOWS_PATH } from '../worker/bundle';
import { temporalConnectionOptions } from '../services/temporal-connection';

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      'run-id': { type: 'string' },
      query: { type: 'string' },
      file: { type: 'string' },
      'workflow-id': { type: 'string' },
    },
  });
  // The replayer's own warnings would repeat each failure at length; the lines printed here say what failed.
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const workflowsPath = process.env.KEEL_WORKFLOWS_PATH
    ? path.resolve(process.env.KEEL_WORKFLOWS_PATH)
    : WORKFLOWS_PATH;
  let histories: HistoryRef[] | AsyncIterable<HistoryRef>;
  let connection: Connection | undefined;
  const config = loadConfig(process.env);
  // A history exported sealed (temporal workflow show without the codec) is decoded with Keel's payload keys.
  const { codecs, dataConverter } = payloadEncryption(config.payloads, 'replayer');
  if (values.file) {
    const history = historyJson.parse(readFileSync(values.file, 'utf8'));
    await decodePayloadsIn(history, codecs);
    histories = [{ workflowId: values['workflow-id'] ?? path.basename(values.file, '.json'), history }];
  } else {
    connection = await Connection.connect(temporalConnectionOptions(config.temporal));
    const client = new Client({ connection, namespace: config.temporal.namespace, dataConverter });
    if (values.query) histories = queryHistories(client, values.query);
    else if (positionals[0]) histories = [await fetchHistory(client, positionals[0], values['run-id'])];
    else {
      console.error(
        'usage: npm run replay -- <workflowId> [--run-id R] | --query "<visibility query>" | --file <history.json>',
      );
      return 2;
    }
  }
  try {
    const outcomes = await replayHistories({ workflowsPath }, histories);
    for (const o of outcomes)
      console.log(o.ok ? `ok    ${o.workflowId} ${o.runId}` : `FAIL  ${o.workflowId} ${o.runId}: ${o.error}`);
    if (outcomes.length === 0) {
      console.error('no histories found');
      return 2;
    }
    const failed = outcomes.filter((o) => !o.ok).length;
    console.log(`${outcomes.length - failed} of ${outcomes.length} replayed cleanly`);
    return failed ? 1 : 0;
  } finally {
    await connection?.close();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : err);
    process.exit(2);
  },
);
