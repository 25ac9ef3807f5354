import type { QueuedMessage } from '../domain/conversation';

/** Where an accepted message went: `accepted` if nothing is ahead of it; and whether it interrupts the running turn. */
export interface Placement {
  status: 'accepted' | 'queued';
  interrupts: boolean;
}

/**
 * The turns waiting in one conversation, and the messages steered into the turn that is running. Plain state, no
 * Temporal calls: the conversation workflow keeps one and decides, from what it answers, what to do next.
 */
export class ConversationQueue {
  private waiting: QueuedMessage[];
  private steered: QueuedMessage[] = [];
  /**
   * Every turn this run has queued, so that a turn reaches the queue once whichever path brings it (a message's
   * acceptance, or open turns taken up from PostgreSQL) and however their results interleave.
   */
  private readonly taken: Set<string>;

  constructor(carried: QueuedMessage[] = []) {
    this.waiting = [...carried];
    this.taken = new Set(this.waiting.map((q) => q.turnId));
  }

  /** Turns waiting, not counting messages steered into the running turn. */
  get length(): number {
    return this.waiting.length;
  }

  /** Everything waiting: turns, and messages steered into the running turn that it has not read yet. */
  get size(): number {
    return this.waiting.length + this.steered.length;
  }

  /** Whether this run has taken the turn already (queued, steered, running or done). */
  has(turnId: string): boolean {
    return this.taken.has(turnId);
  }

  /** Whether a message was steered into the running turn and the turn has not read it yet. */
  get hasSteered(): boolean {
    return this.steered.length > 0;
  }

  /** Queues a turn once: at the back, at the front, or ahead of everything but earlier interrupts. */
  enqueue(entry: QueuedMessage, at: 'back' | 'front' | 'after-interrupts'): void {
    if (this.taken.has(entry.turnId)) return;
    this.taken.add(entry.turnId);
    if (at === 'back') this.waiting.push(entry);
    else if (at === 'front') this.waiting.unshift(entry);
    else {
      const firstOther = this.waiting.findIndex((q) => q.mode !== 'interrupt');
      this.waiting.splice(firstOther < 0 ? this.waiting.length : firstOther, 0, entry);
    }
  }

  /**
   * Takes up the turns PostgreSQL has open (`open`, in their order of acceptance) at a run's start, beside the turns
   * whose messages this run was handed already. A message recorded before the read may be handed over after it, so
   * the turns PostgreSQL lists run in its order and the rest (recorded after the read) follow. Runs that began before
   * `inAcceptanceOrder` put every turn not yet handed over in front; it is asked only where the two orders differ.
   */
  takeUp(open: QueuedMessage[], inAcceptanceOrder: () => boolean): void {
    const handed = new Map(this.waiting.map((q) => [q.turnId, q]));
    const listed = new Set(open.map((t) => t.turnId));
    const ahead = open.filter((t) => !this.taken.has(t.turnId) || handed.has(t.turnId));
    const byAcceptance = [
      ...ahead.map((t) => handed.get(t.turnId) ?? t),
      ...this.waiting.filter((q) => !listed.has(q.turnId)),
    ];
    const fresh = open.filter((t) => !this.taken.has(t.turnId));
    const freshFirst = [...fresh, ...this.waiting];
    const differ = byAcceptance.some((q, i) => q.turnId !== freshFirst[i]!.turnId);
    this.waiting = differ && inAcceptanceOrder() ? byAcceptance : freshFirst;
    for (const t of fresh) this.taken.add(t.turnId);
  }

  /**
   * Places a newly accepted message. While a turn runs, a steer joins it and an interrupt goes next in line (behind
   * interrupts that came earlier) and stops it; anything else waits at the back.
   */
  place(entry: QueuedMessage, turnRunning: boolean): Placement {
    // Its own turn may already be queued, taken up from PostgreSQL by a run that was just starting.
    const idle = !turnRunning && this.waiting.every((q) => q.turnId === entry.turnId);
    if (turnRunning && entry.mode === 'steer' && !this.taken.has(entry.turnId)) {
      this.taken.add(entry.turnId);
      this.steered.push(entry);
      return { status: 'accepted', interrupts: false };
    }
    if (turnRunning && entry.mode === 'interrupt') {
      this.enqueue(entry, 'after-interrupts');
      return { status: 'queued', interrupts: true };
    }
    this.enqueue(entry, 'back');
    return { status: idle ? 'accepted' : 'queued', interrupts: false };
  }

  /** The next turn to run, taken off the queue. */
  next(): QueuedMessage | undefined {
    return this.waiting.shift();
  }

  /** The messages steered into the running turn since its last model call, handed over once. */
  takeSteered(): QueuedMessage[] {
    const steered = this.steered;
    this.steered = [];
    return steered;
  }

  /** At a turn's end: steered messages that arrived after its last model call get a turn of their own, first. */
  endTurn(): void {
    this.waiting.unshift(...this.takeSteered());
  }

  /** What a continue-as-new hands to the next run (no turn is running then, so nothing is steered). */
  carried(): QueuedMessage[] {
    return this.waiting;
  }
}
