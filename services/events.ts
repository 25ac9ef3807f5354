/**
 * A conversation's events as the API streams them: the kept ones are read from their table in id order, and every
 * event is announced on one NOTIFY channel (db/events.ts publishes them).
 */

// What the API serves as it is: the event types, the channel it listens on, and the read of kept events.
export { CONVERSATION_EVENT_TYPES, EVENTS_CHANNEL, eventsAfter, type ConversationEvent } from '../db/events';
