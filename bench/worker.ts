import path from 'node:path';
import { NativeConnection, Runtime, DefaultLogger, Worker } from '@temporalio/worker';
import { payloadEncryptionOfEnv } from '../services/payload-encryption';
import { baselineActivities } from './baseline-activities';

/**
 * The comparison workflows' worker, in a process of its own so that its CPU and memory are measured apart from
 * Keel's worker. Same Temporal server, its own task queue.
 */
async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('WARN'), shutdownSignals: ['SIGINT', 'SIGTERM'] });
  const connection = await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233' });
  const worker = await Worker.create({
    connection,
    taskQueue: process.env.BENCH_TASK_QUEUE ?? 'bench',
    workflowsPath: path.resolve(__dirname, 'baseline-workflows.ts'),
    activities: baselineActivities,
    // Sealed with Keel's key, when the bench gives one: the floors pay what Keel pays for its payloads.
    dataConverter: payloadEncryptionOfEnv(process.env, 'bench worker').dataConverter,
  });
  console.log('bench worker ready');
  await worker.run();
  await connection.close();
}

main().catch((err: unknown) => {
  console.error('bench worker failed:', err);
  process.exit(1);
});
