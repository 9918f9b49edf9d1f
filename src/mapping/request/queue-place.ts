/**
 * The desk first (docs/queue.md): where a new check waits in its tenant's line. Decided once, when
 * the check is created, from the request and where it came from, and stored with the check; the
 * claim query of the store orders the line by it. Pure.
 *
 * - background: a check for an appointment (its booking check and its re-check, however it was
 *   booked), a batch entry, and any request whose `priority` is `deferred`;
 * - desk: everything else (a `$submit` for now, sync or async, a CDS `patient-view` check, the
 *   page's check), and any request whose `priority` is `stat`, wherever it comes from;
 * - `normal` (or no priority) changes nothing.
 * Desk checks are started first (`stat` before `normal`, then arrival); background checks by their
 * deadline (the appointment's start, else arrival + BACKGROUND_DEADLINE_MINUTES), then arrival.
 */
import type { CoverageEligibilityRequest } from 'fhir/r4.js';
import { DEFAULT_BACKGROUND_DEADLINE_MINUTES } from '../../config.js';

export const QUEUE_CLASSES = ['desk', 'background'] as const;
export type QueueClass = (typeof QUEUE_CLASSES)[number];
export const QUEUE_PRIORITIES = ['stat', 'normal', 'deferred'] as const;
export type QueuePriority = (typeof QUEUE_PRIORITIES)[number];

/** CoverageEligibilityRequest.priority's code system. */
export const PROCESS_PRIORITY_SYSTEM = 'http://terminology.hl7.org/CodeSystem/processpriority';

/** Where a check comes from, as far as its place in the line is concerned. */
export type CheckSource =
  /** A request for now: `$submit` (sync or async), the page, a CDS `patient-view` check. */
  | { kind: 'request' }
  /** One entry of a `batch`. */
  | { kind: 'batch-entry' }
  /** An appointment's booking check or re-check (the pre-visit checks), starting at `startAt`. */
  | { kind: 'appointment'; startAt: number };

/** A check's place in the line, stored with it. */
export interface QueuePlace {
  queueClass: QueueClass;
  priority: QueuePriority;
  /** Epoch ms: the order of background checks; a desk check's is its arrival. */
  queueDeadlineAt: number;
}

/** The request's `priority` (processpriority), `normal` when absent or another code. */
export function priorityOf(request: Pick<CoverageEligibilityRequest, 'priority'>): QueuePriority {
  for (const coding of request.priority?.coding ?? []) {
    if (coding.system !== undefined && coding.system !== PROCESS_PRIORITY_SYSTEM) continue;
    const found = QUEUE_PRIORITIES.find((p) => p === coding.code);
    if (found) return found;
  }
  return 'normal';
}

/** The class, priority and deadline of a check created `now` (epoch ms). */
export function queuePlaceOf(
  request: Pick<CoverageEligibilityRequest, 'priority'>,
  source: CheckSource,
  now: number,
  backgroundDeadlineMinutes: number = DEFAULT_BACKGROUND_DEADLINE_MINUTES,
): QueuePlace {
  const priority = priorityOf(request);
  const background = priority === 'deferred' || (priority !== 'stat' && source.kind !== 'request');
  if (!background) return { queueClass: 'desk', priority, queueDeadlineAt: now };
  const queueDeadlineAt =
    source.kind === 'appointment' ? source.startAt : now + backgroundDeadlineMinutes * 60_000;
  return { queueClass: 'background', priority, queueDeadlineAt };
}

/**
 * The tenant's slots kept for desk work: `deskSlots` when set, else 1 when maxInFlight >= 2 and 0
 * otherwise; never more than maxInFlight - 1 (background work always has a slot).
 */
export function deskSlotsOf(maxInFlight: number, deskSlots?: number): number {
  const wanted = deskSlots ?? (maxInFlight >= 2 ? 1 : 0);
  return Math.max(0, Math.min(wanted, maxInFlight - 1));
}
