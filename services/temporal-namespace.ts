import { Connection, type OperatorService, type WorkflowService } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { ALL_SEARCH_ATTRIBUTES } from '../domain/search-attributes';
import { temporalStatus } from './temporal-status';

/** Anything that holds Temporal's operator service: the client's Connection or the worker's NativeConnection. */
export interface OperatorConnection {
  readonly operatorService: OperatorService;
  readonly workflowService: WorkflowService;
}

const KEYWORD = temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;
const KEEL_NAMES = ALL_SEARCH_ATTRIBUTES.map((k) => k.name);

/** The namespace lacks some of Keel's search attributes and Keel could not register them. */
export class MissingSearchAttributesError extends Error {
  constructor(
    readonly namespace: string,
    readonly missing: string[],
    reason: string,
  ) {
    super(
      `Temporal namespace ${namespace} lacks Keel's search attributes ${missing.join(', ')} and Keel could not ` +
        `register them (${reason}). An operator of the namespace registers them (type Keyword), e.g. with ` +
        `\`temporal operator search-attribute create --namespace ${namespace} ` +
        `${missing.map((n) => `--name ${n}`).join(' ')} --type Keyword\`, then starts Keel again.`,
    );
    this.name = 'MissingSearchAttributesError';
  }
}

/** Keel's search attributes that the namespace does not have. */
export async function missingSearchAttributes(connection: OperatorConnection, namespace: string): Promise<string[]> {
  const listed = connection.operatorService.listSearchAttributes({ namespace });
  const { customAttributes } = await listed.catch((err: unknown) => {
    const why = `could not list the search attributes of Temporal namespace ${namespace} (${describe(err)})`;
    throw new Error(`${why}; Keel needs ${KEEL_NAMES.join(', ')} (type Keyword)`, { cause: err });
  });
  return KEEL_NAMES.filter((name) => !(customAttributes && name in customAttributes));
}

/**
 * Registers Keel's search attributes that the namespace lacks and returns their names. Without them Temporal refuses
 * every workflow and Schedule Keel starts (INVALID_ARGUMENT), so the worker and the API call this at
 * start; where the namespace may not be changed (no operator rights, no free slot) it throws
 * MissingSearchAttributesError, which names what is missing. (`start-dev --search-attribute` registers them only
 * when it creates its SQLite file, so a file from an older Keel may lack newer ones.) Given an address, it opens and
 * closes a connection of its own.
 */
export async function ensureSearchAttributes(
  target: OperatorConnection | string,
  namespace = 'default',
): Promise<string[]> {
  if (typeof target === 'string') {
    const connection = await Connection.connect({ address: target });
    try {
      return await ensureSearchAttributes(connection, namespace);
    } finally {
      await connection.close();
    }
  }
  const missing = await missingSearchAttributes(target, namespace);
  if (!missing.length) return [];
  try {
    const searchAttributes = Object.fromEntries(missing.map((name) => [name, KEYWORD]));
    await target.operatorService.addSearchAttributes({ namespace, searchAttributes });
  } catch (err) {
    // Another Keel process starting at the same time may have registered them first: what is still missing counts.
    const still = await missingSearchAttributes(target, namespace);
    if (still.length) throw new MissingSearchAttributesError(namespace, still, describe(err));
  }
  await untilMapped(target, namespace);
  return missing;
}

/** How long a server may take to map search attributes just registered (its namespace registry's refresh). */
const MAPPING_WAIT_MS = 60_000;

/**
 * Resolves once the server maps every one of Keel's search attributes in the namespace. A server that does not read
 * them afresh on every request (a production one) maps attributes just registered only at its next refresh, and
 * until then refuses the workflows Keel starts with them ("has no mapping defined").
 */
async function untilMapped(connection: OperatorConnection, namespace: string): Promise<void> {
  const query = KEEL_NAMES.map((name) => `${name} = ''`).join(' AND ');
  const deadline = Date.now() + MAPPING_WAIT_MS;
  for (;;) {
    try {
      await connection.workflowService.countWorkflowExecutions({ namespace, query });
      return;
    } catch (err) {
      // Only the server's refusal of the query ("no mapping defined") waits for its refresh; any other error is news.
      if (temporalStatus(err)?.name !== 'INVALID_ARGUMENT') throw err;
      if (Date.now() > deadline) {
        const why = `Temporal namespace ${namespace} took Keel's search attributes but did not map them`;
        throw new Error(`${why} within ${MAPPING_WAIT_MS / 1000} s (${describe(err)})`, { cause: err });
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

function describe(err: unknown): string {
  const s = temporalStatus(err);
  if (s) return `Temporal answered ${s.name}: ${s.details}`;
  return err instanceof Error ? err.message : String(err);
}
