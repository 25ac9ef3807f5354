import type { Transports } from '../adapters/delivery/transport';
import type { AdmitResult } from '../contracts/reflection';
import type { JudgeVerdict } from '../domain/admission';
import type { ReflectionSettings } from '../domain/reflection';
import type { ModelCallDeps } from '../services/model-call';
import { modelCallFailure } from '../services/model-call';
import * as admission from '../services/proposal-admission';
import * as reflection from '../services/reflection';
import { currentStep } from '../services/step';

export interface ReflectionActivityDeps extends ModelCallDeps {
  reflection: ReflectionSettings;
  /** How the owner hears that a budget stopped a call. */
  transports: Transports;
}

type Input<F extends (deps: never, input: never) => unknown> = Parameters<F>[1];

export function reflectionActivities(deps: ReflectionActivityDeps) {
  const thinking = (): reflection.ReflectionDeps => ({ ...deps, step: currentStep() });
  const failure = (err: unknown) => {
    throw modelCallFailure(err);
  };
  return {
    reflectionSettings: async (): Promise<ReflectionSettings> => deps.reflection,

    /** "Worth learning?": one cheap call; an error means yes. */
    gateTurn: (input: Input<typeof reflection.gateTurn>) => reflection.gateTurn(thinking(), input),

    /** The reflection call of one tier. */
    proposeReflection: (input: Input<typeof reflection.proposeReflection>): Promise<reflection.ProposeResult> =>
      reflection.proposeReflection(thinking(), input).catch(failure),

    /** The optional judge panel, each judge one call. */
    judgeProposal: (input: Input<typeof reflection.judgeProposal>): Promise<JudgeVerdict[]> =>
      reflection.judgeProposal(thinking(), input),

    /** Admission of a proposal: its gates, then the next memory version or a wait for a human. */
    admitProposal: (input: Input<typeof admission.admitProposal>): Promise<AdmitResult> =>
      admission.admitProposal(deps, input),

    /** A human's decision on a waiting proposal. */
    decideProposal: (input: Input<typeof admission.decideProposal>): Promise<AdmitResult> =>
      admission.decideProposal(deps, input),

    /** Summaries rejected three times go onto the poison list. */
    poisonSummaries: (input: Input<typeof admission.poisonSummaries>): Promise<void> =>
      admission.poisonSummaries(deps, input),
  };
}
