import { sameJson } from './canonical-json';
import type { Delivery } from './delivery';

/**
 * The audit trail's actions, listed and documented here and nowhere else. The set is open: the column is text and
 * the API answers any string, so a new kind of decision (budget changes, once budgets exist) is one line here and
 * a `recordAudit` call where the change is written. Each entry says what `subject` and `detail` hold.
 */
export const AUDIT_ACTIONS = {
  'routine_run.approve': "a routine run's gated action was approved (subject: the run id; detail: {note?})",
  'routine_run.reject': "a routine run's gated action was rejected (subject: the run id; detail: {note?})",
  'proposal.approve': 'a reflection proposal waiting for approval was approved (subject: its id; detail: {note?})',
  'proposal.reject': 'a reflection proposal waiting for approval was rejected (subject: its id; detail: {note?})',
  'memory.rollback': 'memory was rolled back (subject: the new version; detail: {toVersion})',
  'task.approve': 'a task waiting for approval was approved: pending_approval → ready (subject: #<task number>)',
  'agent.destinations':
    "the agent's owner delivery or named destinations changed (subject: the agent id; detail: what changed, " +
    'webhooks by origin only: no path, query or secret)',
  'tool_server.create': 'a tool server was added (subject: its name; detail: {transport, tools})',
  'tool_server.replace': 'a tool server was replaced by a PUT (subject: its name; detail: {transport, tools})',
  'tool_server.delete': 'a tool server was removed (subject: its name)',
  'tool_server.policies':
    "a tool server's policies or its being enabled changed (subject: its name; detail: {policies?, defaultPolicy?, " +
    'enabled?})',
  'tool_call.approve': "a tool call waiting for a person was approved (subject: the call's id; detail: {note?})",
  'tool_call.reject': "a tool call waiting for a person was rejected (subject: the call's id; detail: {note?})",
  'agent.budgets': "the agent's spending limits changed (subject: the agent id; detail: {from, to}, USD per window)",
  'run.reset':
    "an operator reset a run of the agent's (subject: the workflow id; detail: {runId, newRunId, to, reason})",
  'run.replay':
    "an operator replayed a run of the agent's against the workers' code (subject: the workflow id; " +
    'detail: {runId, ok})',
  'conversation.delete':
    'a person deleted a conversation: its workflow ended, its transcript, messages, results and streamed text erased ' +
    '(subject: the conversation id; detail: {deletionId, phase: requested|finished, counts when finished})',
  'agent.delete':
    'a person deleted the agent and everything it owned; this trail and the effects ledger keys remain ' +
    '(subject: the agent id; detail: {deletionId, phase: requested|finished, counts when finished})',
  'eval.start':
    'a person started an evaluation of the agent against a candidate configuration, which is never applied to it ' +
    '(subject: the evaluation id; detail: {mode, cases, suite})',
  'conversation.fork':
    'a person forked a conversation at a turn into a sandbox conversation under a candidate (subject: the new ' +
    'conversation id; detail: {from, atTurn})',
  'fork.effects':
    "a person changed which tools of a fork may have real effects (subject: the fork's conversation id; detail: " +
    '{tools})',
} as const satisfies Record<string, string>;
export type AuditAction = keyof typeof AUDIT_ACTIONS;

/** A delivery as the trail shows it: a webhook's path and query can carry a secret (Slack's do), so only its origin. */
export type DeliveryInAudit =
  { channel: 'none' } | { channel: 'webhook'; origin: string; signed: boolean } | { channel: 'slack'; target: string };

export function deliveryInAudit(d: Delivery): DeliveryInAudit {
  switch (d.channel) {
    case 'none':
      return { channel: 'none' };
    case 'webhook':
      // The Delivery schema guarantees the shape: scheme, then a host (and port) without userinfo.
      return { channel: 'webhook', origin: /^https?:\/\/[^/?#]+/i.exec(d.url)?.[0] ?? '', signed: !!d.secret };
    case 'slack':
      return { channel: 'slack', target: d.target };
  }
}

/** Where an agent's output may go: what a destination change compares. */
export interface AgentDestinations {
  owner: Delivery | null;
  destinations: Record<string, Delivery>;
}

type Change = { from: DeliveryInAudit | null; to: DeliveryInAudit | null };

export interface DestinationChange {
  owner?: Change;
  destinations?: {
    added: Record<string, DeliveryInAudit>;
    removed: string[];
    changed: Record<string, Change>;
  };
}

/**
 * What changed between two settings of an agent's destinations, undefined when nothing did. A delivery whose
 * secret or URL path alone changed shows as changed with equal-looking sides: that it changed is the record.
 */
export function destinationChange(before: AgentDestinations, after: AgentDestinations): DestinationChange | undefined {
  const view = (d: Delivery | null) => (d ? deliveryInAudit(d) : null);
  const change: DestinationChange = {};
  if (!sameJson(before.owner, after.owner)) change.owner = { from: view(before.owner), to: view(after.owner) };
  // Built from entries: a name such as `__proto__` then stays a key of its own instead of setting a prototype.
  const added: [string, DeliveryInAudit][] = [];
  const changed: [string, Change][] = [];
  const removed = Object.keys(before.destinations)
    .filter((name) => !Object.hasOwn(after.destinations, name))
    .sort();
  for (const name of Object.keys(after.destinations).sort()) {
    const was = Object.hasOwn(before.destinations, name) ? before.destinations[name] : undefined;
    const now = after.destinations[name]!;
    if (!was) added.push([name, deliveryInAudit(now)]);
    else if (!sameJson(was, now)) changed.push([name, { from: deliveryInAudit(was), to: deliveryInAudit(now) }]);
  }
  if (removed.length || added.length || changed.length)
    change.destinations = { added: Object.fromEntries(added), removed, changed: Object.fromEntries(changed) };
  return change.owner || change.destinations ? change : undefined;
}
