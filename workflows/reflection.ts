import {
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  proxyActivities,
  setHandler,
  setWorkflowOptions,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import type { KeelActivities } from '../activities';
import {
  decideProposal,
  reflectionState,
  turnFinished,
  type AdmitResult,
  type LastDrain,
  type ProposalDecision,
  type ReflectionInput,
} from '../contracts/reflection';
import { NON_RETRYABLE_MODEL_FAILURES } from '../domain/failures';
import { enqueue, REFLECTION, type QueuedSummary, type TurnSummary } from '../domain/reflection-queue';
import type { ProposalAnswer, ReflectionSettings } from '../domain/reflection';
import { store } from './activities';
import { turnSummaryKey } from '../domain/ids';

/** Reflection's model calls: a large model may think for minutes; a refused request does not retry. A call that fails
 * for good leaves its summaries queued (drain), never fails the workflow. Database steps go through `store`. */
const thinking = proxyActivities<KeelActivities>({
  startToCloseTimeout: '10 minutes',
  retry: {
    initialInterval: '5 seconds',
    backoffCoefficient: 2,
    maximumInterval: '5 minutes',
    maximumAttempts: 5,
    nonRetryableErrorTypes: NON_RETRYABLE_MODEL_FAILURES,
  },
});

type DrainOutcome = 'done' | 'rejected';

/**
 * The agent's reflection, one long-lived workflow `reflect:<agentId>`: turn summaries arrive by signal (the latest per
 * conversation wins), pass the optional "worth learning?" gate, and wait in the queue. A drain runs when 5 are queued
 * or every 180 minutes, one at a time: the model proposes edits, the deterministic gates admit or reject them whole,
 * a file that needs a human waits for approval, and an admitted proposal becomes a new memory version. Summaries
 * whose proposals fail the hard gates 3 times go to the poison list.
 */
export async function reflectionWorkflow(input: ReflectionInput): Promise<void> {
  const { agentId } = input;
  const settings: ReflectionSettings = await store.reflectionSettings();
  let queue: QueuedSummary[] = input.queue ?? [];
  const incoming: TurnSummary[] = [];
  let nextDrainAt = input.nextDrainAt ?? Date.now() + settings.drainEveryMs;
  let draining = false;
  let drainingProposal: string | null = null;
  let awaiting: { proposalId: string; decision?: ProposalDecision; result?: AdmitResult } | null = null;
  let arrivedSinceDrain = false;
  let drains = 0;
  let lastDrain: LastDrain | null = null;

  setHandler(turnFinished, (s) => void incoming.push(s));
  setHandler(reflectionState, () => ({
    queued: queue,
    draining,
    awaiting: awaiting?.proposalId ?? null,
    drains,
    lastDrain,
  }));
  setHandler(
    decideProposal,
    async (d) => {
      // A decision can arrive between the proposal's record and the drain's wait for it: it waits for that moment.
      await condition(() => awaiting?.proposalId === d.proposalId || drainingProposal !== d.proposalId);
      const waiting = awaiting;
      if (!waiting || waiting.proposalId !== d.proposalId || waiting.decision)
        throw ApplicationFailure.nonRetryable(`proposal ${d.proposalId} is not waiting for approval`);
      // The drain applies the decision; the caller hears how it came out.
      waiting.decision = d;
      await condition(() => waiting.result !== undefined);
      return waiting.result!;
    },
    {
      validator: (d: ProposalDecision) => {
        // Only the proposal of the drain under way, and only once.
        if (drainingProposal !== d.proposalId || awaiting?.decision)
          throw new Error(`proposal ${d.proposalId} is not waiting for approval`);
      },
    },
  );

  for (;;) {
    await condition(
      () => incoming.length > 0 || (arrivedSinceDrain && queue.length >= settings.drainAtQueued),
      Math.max(1, nextDrainAt - Date.now()),
    );
    // Each arrival passes the gate, then replaces its conversation's earlier summary.
    while (incoming.length) {
      const summary = incoming.shift()!;
      // An error of the gate means yes, also when its activity gives up.
      const worth = settings.gate
        ? await thinking.gateTurn({ agentId, summary }).catch(() => ({ evolve: true }))
        : { evolve: true };
      if (worth.evolve) {
        queue = enqueue(queue, summary);
        arrivedSinceDrain = true;
      }
    }
    const due = Date.now() >= nextDrainAt;
    if ((arrivedSinceDrain && queue.length >= settings.drainAtQueued) || (due && queue.length > 0)) {
      arrivedSinceDrain = false;
      draining = true;
      lastDrain = await drain();
      drains++;
      draining = false;
    }
    if (due) nextDrainAt = Date.now() + settings.drainEveryMs;
    if (workflowInfo().continueAsNewSuggested && incoming.length === 0) {
      // A decision's handler may still be answering its caller.
      await condition(allHandlersFinished);
      await continueAsNew<typeof reflectionWorkflow>({ agentId, queue, nextDrainAt });
    }
  }

  /** One drain over the queue (at most maxBatch): propose (escalating at most twice), admit, settle the summaries. */
  async function drain(): Promise<LastDrain> {
    const batch = queue.slice(0, REFLECTION.maxBatch);
    const proposalId = uuid4();
    drainingProposal = proposalId;
    try {
      return await drainBatch(batch, proposalId);
    } catch (err) {
      // A model that stays down or refuses the request: transient, the summaries stay queued for a later drain.
      if (err instanceof ActivityFailure) return { outcome: 'model_failed', error: err.cause?.message ?? err.message };
      throw err;
    } finally {
      drainingProposal = null;
    }
  }

  async function drainBatch(batch: QueuedSummary[], proposalId: string): Promise<LastDrain> {
    let answer: ProposalAnswer | undefined;
    let tier = 0;
    for (; tier <= REFLECTION.maxEscalations; tier++) {
      const proposed = await thinking.proposeReflection({ agentId, proposalId, summaries: batch, tier });
      // The daily cost ceiling is transient: the summaries stay queued for a later drain.
      if (proposed.kind === 'ceiling')
        return { outcome: 'ceiling_reached', spentUsd: proposed.spentUsd, ceilingUsd: proposed.ceilingUsd };
      // An unreadable answer counts against the summaries, as a rejection does: a batch that always yields one ends
      // on the poison list instead of paying for a call every drain.
      if (proposed.kind === 'unreadable') {
        await settle(batch, 'rejected', proposalId);
        return { outcome: 'unreadable', error: proposed.error };
      }
      answer = proposed.answer;
      if (answer.status !== 'escalate') break;
    }
    // Past the last tier: transient.
    if (!answer || answer.status === 'escalate') return { outcome: 'escalation_exhausted' };
    const tierName = settings.tiers[Math.min(tier, settings.tiers.length - 1)] ?? String(tier);
    const judges =
      answer.status === 'ok' && settings.judges > 0
        ? await thinking.judgeProposal({ agentId, proposalId, proposal: answer })
        : undefined;
    let result = await store.admitProposal({
      agentId,
      workflowId: workflowInfo().workflowId,
      proposalId,
      answer,
      summaries: batch,
      tier: tierName,
      judges,
    });
    if (result.status === 'awaiting_approval') {
      const waiting: { proposalId: string; decision?: ProposalDecision; result?: AdmitResult } = { proposalId };
      awaiting = waiting;
      await condition(() => waiting.decision !== undefined, settings.approvalWaitMs, {
        summary: `waiting for approval of proposal ${proposalId}`,
      });
      const decision = waiting.decision ?? {
        proposalId,
        approved: false,
        note: 'no decision within the approval wait',
      };
      result = await store.decideProposal({
        agentId,
        proposalId,
        approved: decision.approved,
        ...(decision.note ? { note: decision.note } : {}),
      });
      waiting.result = result;
      awaiting = null;
    }
    const blamed =
      result.status === 'rejected' &&
      result.checks.some(
        (c) =>
          c.kind === 'hard' && !c.passed && !c.transient && c.name !== 'human_approval' && c.name !== 'base_unchanged',
      );
    const transient = result.status === 'rejected' && !blamed && result.checks.some((c) => c.transient);
    if (!transient) await settle(batch, blamed ? 'rejected' : 'done', proposalId);
    return { outcome: 'proposal', proposalId, status: result.status };
  }

  /** Drained summaries leave the queue, unless a newer one of the same conversation arrived meanwhile. */
  async function settle(batch: readonly QueuedSummary[], outcome: DrainOutcome, proposalId: string): Promise<void> {
    const drained = new Set(batch.map(turnSummaryKey));
    queue = queue.filter((q) => !drained.has(turnSummaryKey(q)));
    if (outcome !== 'rejected') return;
    // A hard-gate rejection counts against each summary; the third sends it to the poison list.
    const again = batch
      .map((s) => ({ ...s, failures: s.failures + 1 }))
      .filter((s) => !queue.some((q) => q.conversationId === s.conversationId));
    const poisoned = again.filter((s) => s.failures >= REFLECTION.poisonAfterFailures);
    if (poisoned.length) await store.poisonSummaries({ agentId, proposalId, summaries: poisoned });
    queue = [...again.filter((s) => s.failures < REFLECTION.poisonAfterFailures), ...queue];
  }
}

// The agent's reflection never ends, so it cannot stay on the build it started on: with versioned workers it moves to
// each new current build at its next task, and its changes must replay old histories (patched(); test/histories).
// Temporal refuses a behaviour from an unversioned worker (whose version has a build id but no deployment name), so it
// is declared only when the worker belongs to a deployment.
setWorkflowOptions(
  () => (workflowInfo().currentDeploymentVersion?.deploymentName ? { versioningBehavior: 'AUTO_UPGRADE' } : {}),
  reflectionWorkflow,
);
