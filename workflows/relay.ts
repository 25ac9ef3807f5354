import type { ConversationInput } from '../domain/conversation';
import { DELEGATION } from '../domain/delegate-lifecycle';
import type { DelegateFinished } from '../domain/delegation';

type Carried = Pick<NonNullable<ConversationInput['carried']>, 'liveDelegates' | 'pendingResults' | 'retriggers'>;

/** What to do with the admitted results at hand: relay them in a retrigger turn, or only note them. */
export interface RelayDue {
  as: 'retrigger' | 'note';
  delegateIds: string[];
}

/**
 * A conversation's delegates, from the claim that one has finished to the relay of its result: the delegates still
 * running, their completion claims not yet examined, and the admitted results not yet relayed. Results that arrive
 * together are relayed together, after a debounce; at most DELEGATION.retriggersPerUserMessage retrigger turns
 * follow one user message, and past that the results are only noted. Plain state: the conversation workflow runs the
 * admission and the relay, and hands in the debounce timer.
 */
export class DelegateRelay {
  /** Delegates still running. The same set for the whole run: a turn's spawns add to it. */
  readonly live: Set<string>;
  private readonly claims: DelegateFinished[] = [];
  private pending: string[];
  private retriggers: number;
  private due: boolean;
  private armed = false;

  constructor(
    carried: Carried | undefined,
    /** Resolves once results that arrive together have had a moment for company. */
    private readonly debounce: () => Promise<void>,
  ) {
    this.live = new Set(carried?.liveDelegates ?? []);
    this.pending = [...(carried?.pendingResults ?? [])];
    this.retriggers = carried?.retriggers ?? 0;
    this.due = this.pending.length > 0;
  }

  /** A delegate's claim that its outcome is committed; only a claim: admission re-reads the committed row. */
  claim(finished: DelegateFinished): void {
    this.claims.push(finished);
  }

  get hasClaims(): boolean {
    return this.claims.length > 0;
  }

  /** No delegate out, no claim to examine, no result waiting for (or debouncing towards) its relay. */
  get settled(): boolean {
    return this.live.size === 0 && this.claims.length === 0 && this.pending.length === 0 && !this.armed && !this.due;
  }

  /** The debounce is over: the results at hand wait for their relay. */
  get relayDue(): boolean {
    return this.due;
  }

  /** The claims not yet examined, handed to admission once. */
  takeClaims(): DelegateFinished[] {
    return this.claims.splice(0);
  }

  /** What admission answered: the delegates still running, and those admitted; a fresh result arms the relay. */
  admitted(admitted: string[], live: string[]): void {
    this.live.clear();
    for (const id of live) this.live.add(id);
    const fresh = admitted.filter((id) => !this.pending.includes(id));
    if (fresh.length === 0) return;
    this.pending.push(...fresh);
    if (this.armed) return;
    this.armed = true;
    void this.debounce().then(() => {
      this.armed = false;
      this.due = true;
    });
  }

  /** Takes the results at hand for their relay: a retrigger turn while the allowance lasts, else a note. */
  takeDue(): RelayDue | undefined {
    this.due = false;
    const delegateIds = this.pending;
    this.pending = [];
    if (delegateIds.length === 0) return undefined;
    if (this.retriggers >= DELEGATION.retriggersPerUserMessage) return { as: 'note', delegateIds };
    this.retriggers++;
    return { as: 'retrigger', delegateIds };
  }

  /** A user's message starts a turn: the retrigger allowance is whole again. */
  userTurnStarted(): void {
    this.retriggers = 0;
  }

  /** What a continue-as-new hands to the next run. */
  carried(): Carried {
    return { liveDelegates: [...this.live], pendingResults: this.pending, retriggers: this.retriggers };
  }
}
