import * as conversationTurn from '../services/conversation-turn';
import type { StepInput } from '../services/step';

export function conversationActivities(deps: conversationTurn.ConversationTurnDeps) {
  // Each activity is its step in services/conversation-turn.ts, with this worker's dependencies.
  return {
    acceptMessage: (input: StepInput<typeof conversationTurn.acceptMessage>) =>
      conversationTurn.acceptMessage(deps, input),
    conversationIdle: (input: StepInput<typeof conversationTurn.conversationIdle>) =>
      conversationTurn.conversationIdle(deps, input),
    openTurns: (input: StepInput<typeof conversationTurn.openTurns>) => conversationTurn.openTurns(deps, input),
    startTurn: (input: StepInput<typeof conversationTurn.startTurn>) => conversationTurn.startTurn(deps, input),
    appendToTranscript: (input: StepInput<typeof conversationTurn.appendToTranscript>) =>
      conversationTurn.appendToTranscript(deps, input),
    startRetrigger: (input: StepInput<typeof conversationTurn.startRetrigger>) =>
      conversationTurn.startRetrigger(deps, input),
    finishTurn: (input: StepInput<typeof conversationTurn.finishTurn>) => conversationTurn.finishTurn(deps, input),
  };
}
