/**
 * What every step of a check's lifecycle uses: the dependencies a step is given, and the check's
 * timeout, mapper context and last envelope. The steps themselves: create.ts, poll.ts, finish.ts,
 * with write.ts (how a step reads and writes its check) and schedule.ts (when it next polls).
 */
import type { Reference } from 'fhir/r4.js';
import type { Tenant } from '../../config.js';
import type { Logger } from '../../log.js';
import type { CerContext } from '../../mapping/types.js';
import type { Envelope } from '../../upstream/contract.js';
import { envelopeSchema } from '../../upstream/contract.js';
import type { UpstreamPort } from '../../upstream/port.js';
import type { PayerDurationBook } from '../payer-durations.js';
import type { PollSettings } from '../poll-schedule.js';
import type { Slots } from '../slots.js';
import type { Check, CheckStore, ClaimedCheck } from '../store/check-store.js';
import type { QueueClass } from '../../mapping/request/queue-place.js';

export interface LifecycleDeps {
  store: CheckStore;
  upstream: UpstreamPort;
  tenant: (id: string) => Tenant | undefined;
  logger: Logger;
  owner: string;
  now: () => number;
  baseUrl: string;
  pollIntervalMs: number;
  /** CHECK_TIMEOUT_MS or SEARCH_ALL_TIMEOUT_MS. */
  timeoutMs: (isSearchAll: boolean) => number;
  /** Poll interval once a check is past its timeout ("still checking"). */
  slowPollIntervalMs: number;
  /** How long a payer backoff guard stays open. */
  backoffGuardMs: number;
  onEvent?: (event: LifecycleEvent) => void;
  /**
   * How many create-task calls may be out at once in this replica (the upstream client's pool).
   * A check is written `creating` only when its call can go out at once, so a crash leaves few
   * ambiguous checks behind, not every check queued for a connection.
   */
  createSlots?: Slots;
  /**
   * Adaptive polling (docs/polling.md): the schedule's settings and the payers' durations.
   * Absent, or strategy `fixed`: a poll every pollIntervalMs, as before.
   */
  polling?: { settings: PollSettings; durations: PayerDurationBook };
  /**
   * Checks whose create-task answer this replica holds until the store takes it (a store outage;
   * recordCreatedTask): a claim of one of them in `creating` is not an ambiguous create-task.
   */
  heldTasks?: Set<string>;
  /** True once the replica is stopping: a held task id is then given up (and logged). */
  stopping?: () => boolean;
  /** A final answer with documents to keep was written: wakes the capture worker. */
  onEvidence?: () => void;
}

export type LifecycleEvent =
  | {
      type: 'create';
      tenantId: string;
      result: string;
      /** The check's class in its tenant's line (docs/queue.md). */
      queueClass?: QueueClass;
      /** From accepted to create-task sent (ms), for a check's first try of its first task. */
      waitedMs?: number;
    }
  | { type: 'poll'; tenantId: string; result: string; lateMs: number }
  | { type: 'done'; tenantId: string; outcome: string }
  /** A recent answer was given again instead of a new check (docs/batch-and-reuse.md). */
  | { type: 'reuse'; tenantId: string };

/** The dependencies of one step, and what the step has done so far. */
export interface StepDeps extends LifecycleDeps {
  /** The step's last write dropped the lease (see write). */
  released: boolean;
}

/** The check's timeout (CHECK_TIMEOUT_MS or SEARCH_ALL_TIMEOUT_MS). */
export function timeoutOf(check: Pick<Check, 'isSearchAll'>, deps: LifecycleDeps): number {
  return deps.timeoutMs(check.isSearchAll);
}

/** The mapper's context for a check. */
export function cerContext(
  check: Pick<Check, 'id' | 'request' | 'isSearchAll' | 'createdAt'> & {
    patient: Reference;
    insurer: Reference;
  },
  baseUrl: string,
): CerContext {
  return {
    checkId: check.id,
    patient: check.patient,
    insurer: check.insurer,
    request: check.request,
    isSearchAll: check.isSearchAll,
    baseUrl,
    now: new Date(check.createdAt).toISOString(),
  };
}

/** The context of a stored check: the patient and insurer references live in its CER. */
export function contextOf(check: Check, deps: LifecycleDeps): CerContext {
  return cerContext({ ...check, patient: check.cer.patient, insurer: check.cer.insurer }, deps.baseUrl);
}

export function parsedEnvelope(check: ClaimedCheck): Envelope | undefined {
  const parsed = envelopeSchema.safeParse(check.envelope);
  return parsed.success ? parsed.data : undefined;
}
