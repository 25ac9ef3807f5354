import * as conversationTurn from '../services/conversation-turn';
import { bindSteps } from '../services/step';

/** Each activity is its step in services/conversation-turn.ts, with this worker's dependencies. */
export function conversationActivities(deps: conversationTurn.ConversationTurnDeps) {
  return bindSteps(deps, conversationTurn);
}
