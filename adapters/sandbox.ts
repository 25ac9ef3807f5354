import ivm from 'isolated-vm';
import type { Gate } from '../domain/routines';
import { scrub } from '../domain/text';

/** The limits of one tool run. */
export interface SandboxLimits {
  memoryMb: number;
  timeoutMs: number;
}

/** A capability call failed: the tool sees an Error with this message and may catch it. */
export class CapabilityError extends Error {
  override name = 'CapabilityError';
}

/**
 * The run must stop here, whatever the tool would do: a gate that needs approval, or an error the tool may not
 * catch.
 */
export class RunStop extends Error {
  override name = 'RunStop';
  constructor(readonly stop: { kind: 'gate'; gate: Gate; seq: number } | { kind: 'error'; detail: string }) {
    super(stop.kind === 'gate' ? `gated: ${stop.gate.capability}` : stop.detail);
  }
}

/**
 * The host side of the capabilities: runs one call, throws CapabilityError (the tool may catch it) or RunStop. Any
 * other error is the host's own (a database outage, say): the run stops and runInSandbox rethrows it, so that
 * Temporal retries the activity, which replays the journal.
 */
export type CapabilityHost = (capability: string, args: unknown[]) => Promise<unknown>;

/** A gate stop names the call (its journal seq) that approval lets through. */
export type SandboxResult =
  | { status: 'ok'; result: unknown }
  | { status: 'needs_approval'; gate: Gate; seq: number }
  | { status: 'error'; detail: string };

/** The longest result kept of a tool (as JSON). */
const MAX_RESULT_CHARS = 200_000;

/**
 * Bootstraps the isolate: the capability roots call the host through one reference; a failed call becomes an Error
 * inside the tool. Nothing else of the host is reachable (an isolate has no require, process, fetch or timers).
 */
const BOOTSTRAP = `
const call = $0;
// Taken before the tool's code runs, so that a tool replacing JSON cannot garble what crosses to the host.
const { parse, stringify } = JSON;
const invoke = (name) => async (...args) => {
  const answer = parse(await call.apply(undefined, [name, stringify(args)], { result: { promise: true, copy: true } }));
  if (answer.error !== undefined) throw new Error(answer.error);
  return answer.value;
};
globalThis.data = Object.freeze({ list: invoke('data.list'), get: invoke('data.get'), upsert: invoke('data.upsert') });
globalThis.ai = Object.freeze({
  score: invoke('ai.score'),
  summarize: invoke('ai.summarize'),
  write: invoke('ai.write'),
});
globalThis.integrations = Object.freeze({ call: invoke('integrations.call') });
globalThis.send = invoke('send');
globalThis.browser = invoke('browser');
Object.defineProperty(globalThis, '__keelStringify', { value: stringify, writable: false, configurable: false });
`;

/**
 * Runs a tool's code in a fresh V8 isolate under a memory limit and a wall-clock limit: `code` defines the async
 * function `name`, called with `args`. Capability calls go to `host`. The isolate is disposed when the run ends,
 * stops at a gate, runs out of time or memory; the process running it is never at risk.
 */
export async function runInSandbox(
  tool: { name: string; code: string },
  args: Record<string, string>,
  host: CapabilityHost,
  limits: SandboxLimits,
): Promise<SandboxResult> {
  const isolate = new ivm.Isolate({ memoryLimit: limits.memoryMb });
  let stopped: RunStop | undefined;
  let hostFailure: Error | undefined;
  let stop: (s: RunStop) => void = () => undefined;
  const stopping = new Promise<never>((_, reject) => {
    stop = (s) => {
      stopped ??= s;
      reject(s);
    };
  });
  stopping.catch(() => undefined);
  const timer = setTimeout(
    () =>
      stop(
        new RunStop({
          kind: 'error',
          detail: `this took too long, so the run was stopped at the ${limits.timeoutMs / 1000} s limit`,
        }),
      ),
    limits.timeoutMs,
  );
  try {
    const context = await isolate.createContext();
    const bridge = async (capability: string, argsJson: string): Promise<string> => {
      let args: unknown[];
      try {
        args = scrub(JSON.parse(argsJson) as unknown[]);
      } catch {
        return JSON.stringify({ error: `the arguments of ${capability} are not JSON` });
      }
      try {
        const value = await host(capability, args);
        return JSON.stringify({ value: value ?? null });
      } catch (err) {
        if (err instanceof CapabilityError) return JSON.stringify({ error: err.message });
        if (!(err instanceof RunStop)) hostFailure ??= err instanceof Error ? err : new Error(String(err));
        stop(err instanceof RunStop ? err : new RunStop({ kind: 'error', detail: 'host failure' }));
        return new Promise<string>(() => undefined); // the tool never hears back: its isolate is disposed
      }
    };
    await context.evalClosure(BOOTSTRAP, [bridge], { arguments: { reference: true } });
    const source =
      `${tool.code}\n;(async () => { const r = await ${tool.name}(${JSON.stringify(args)}); ` +
      'return __keelStringify(r === undefined ? null : r); })()';
    const run = context
      .eval(source, { timeout: limits.timeoutMs, promise: true, copy: true, filename: `${tool.name}.js` })
      .then((json: unknown) => String(json));
    const json = await Promise.race([run, stopping]);
    let result: unknown;
    try {
      result = scrub(
        JSON.parse(json.length > MAX_RESULT_CHARS ? JSON.stringify(json.slice(0, MAX_RESULT_CHARS)) : json),
      );
    } catch {
      return { status: 'error', detail: 'the tool returned something that is not JSON' };
    }
    return { status: 'ok', result };
  } catch (err) {
    if (hostFailure !== undefined) throw hostFailure;
    const s = stopped ?? (err instanceof RunStop ? err : undefined);
    if (s)
      return s.stop.kind === 'gate'
        ? { status: 'needs_approval', gate: s.stop.gate, seq: s.stop.seq }
        : { status: 'error', detail: s.stop.detail };
    return { status: 'error', detail: describeFailure(err, limits) };
  } finally {
    clearTimeout(timer);
    if (!isolate.isDisposed) isolate.dispose();
  }
}

/** A failure of the tool itself, in words a reader (and the crash check) understands. */
function describeFailure(err: unknown, limits: SandboxLimits): string {
  const message = err instanceof Error ? err.message : String(err);
  if (/memory limit/i.test(message)) return `the tool ran out of memory: the ${limits.memoryMb} MB limit stopped it`;
  if (/Script execution timed out/i.test(message))
    return `this took too long, so the run was stopped at the ${limits.timeoutMs / 1000} s limit`;
  const name = err instanceof Error && err.name !== 'Error' && !message.startsWith(err.name) ? `${err.name}: ` : '';
  return `${name}${message}`;
}
