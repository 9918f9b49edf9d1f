/**
 * What a waiting check says of its wait (docs/queue.md): how many checks of its tenant are ahead
 * of it in the line and about how long until it is sent. Pure: the counts and a task's typical
 * duration come in.
 */

/** Checks ahead of a waiting check and about how long until it is sent. */
export interface QueueWait {
  ahead: number;
  /** About how long until it is sent (ms). */
  etaMs: number;
}

export interface QueueFacts {
  /** The tenant's waiting checks it starts after. */
  ahead: number;
  place: { queueClass: 'desk' | 'background' };
  /** The tenant's checks holding a slot, per class. */
  counts: Record<'desk' | 'background', { running: number }>;
  maxInFlight: number;
  deskSlots: number;
  /** About how long a task holds its slot (ms). */
  taskMs: number;
}

/**
 * The wait of a new check, or null when a slot of its class is free for it now (it is sent at
 * once). The slots of its class free up about once per task duration each: the checks ahead go
 * first, in waves of that many.
 */
export function queueWaitOf(facts: QueueFacts): QueueWait | null {
  const { ahead, counts, maxInFlight, deskSlots } = facts;
  const running = counts.desk.running + counts.background.running;
  const background = facts.place.queueClass === 'background';
  const slots = background ? maxInFlight - deskSlots : maxInFlight;
  const free = Math.max(
    0,
    background ? Math.min(maxInFlight - running, slots - counts.background.running) : maxInFlight - running,
  );
  if (ahead < free) return null;
  const waves = Math.floor((ahead - free) / Math.max(1, slots)) + 1;
  return { ahead, etaMs: waves * facts.taskMs };
}

/** "2 checks ahead, about 1 min": the page shows it while the check waits. */
export function waitWords(wait: QueueWait): string {
  const ahead =
    wait.ahead === 0 ? 'next in line' : `${wait.ahead} ${wait.ahead === 1 ? 'check' : 'checks'} ahead`;
  const minutes = Math.max(1, Math.round(wait.etaMs / 60_000));
  const eta = minutes < 90 ? `${minutes} min` : `${Math.round(minutes / 60)} h`;
  return `${ahead}, about ${eta}`;
}

/** The start of a waiting check's disposition (the page finds its wait after it). */
export const WAITING_PREFIX = 'Waiting to be sent to the payer portal: ';

/** A waiting check's disposition (and so its narrative). */
export function waitingNote(wait: QueueWait): string {
  return `${WAITING_PREFIX}${waitWords(wait)}.`;
}
