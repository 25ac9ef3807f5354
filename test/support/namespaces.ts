import { randomUUID } from 'node:crypto';
import type { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { eventually } from './keel';

/**
 * A namespace of a test's own, known to the server once this resolves. The dev server gives Keel's search attributes
 * only to the namespace it starts with, so a fresh one has none.
 */
export async function freshNamespace(connection: Connection, prefix: string): Promise<string> {
  const namespace = `${prefix}-${randomUUID().slice(0, 8)}`;
  await connection.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
  await eventually(
    () =>
      connection.workflowService.describeNamespace({ namespace }).then(
        () => true,
        () => false,
      ),
    30_000,
    `namespace ${namespace} to be known`,
  );
  return namespace;
}
