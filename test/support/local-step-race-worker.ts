// A worker process for test/local-step-replay.test.ts, so that the test can kill it with kill -9 mid-task.
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { raceActivities } from './local-step-race-activities';

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const worker = await Worker.create({
    connection: await NativeConnection.connect({ address: process.env.TEMPORAL_ADDRESS }),
    taskQueue: process.env.RACE_TASK_QUEUE ?? 'race',
    workflowBundle: { codePath: process.env.RACE_BUNDLE ?? '' },
    activities: raceActivities,
  });
  console.log('ready');
  await worker.run();
}

void main();
