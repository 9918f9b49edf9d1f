/**
 * The check store: a check is a row, not a promise. Every state change is written before it is
 * acted on, so a restart, or a second replica on PostgreSQL, resumes every check. One
 * implementation (sql-store.ts) on two databases: SQLite (embedded default) and PostgreSQL
 * (several replicas).
 */
import type { CheckAnswer } from '../../mapping/response/answer.js';
import type { CoverageEligibilityRequest, CoverageEligibilityResponse, OperationOutcome } from 'fhir/r4.js';
import type { AuditRecord } from '../../fhir/audit-event.js';
import type { UpstreamTaskRequest } from '../../upstream/contract.js';
import type { SubscriptionStore } from './subscription-store.js';
import type { PayerDurations, TaskDurations } from '../poll-schedule.js';
import type { QueueClass, QueuePlace, QueuePriority } from '../../mapping/request/queue-place.js';

/**
 * Lifecycle of a check.
 * - waiting:  accepted, waiting for a tenant slot (maxInFlight); nothing sent upstream.
 * - starting: a slot is reserved for it; create-task not yet sent (safe to resume after a crash).
 * - creating: written immediately before create-task goes out. Found again after a crash with an
 *             expired lease, it is ambiguous whether a task exists: it is never re-sent.
 * - polling:  the upstream task exists (upstreamTaskId set); polled until terminal.
 * - done:     the final CER (complete or error) is stored. Nothing more happens.
 */
export const CHECK_STATES = ['waiting', 'starting', 'creating', 'polling', 'done'] as const;
export type CheckState = (typeof CHECK_STATES)[number];

/**
 * Whether a check has its answer: done, or ended early while it still holds its slot (an
 * ambiguous create-task keeps the slot until a task it may have started must be over).
 */
export function isAnswered(check: Pick<Check, 'state' | 'outcome'>): boolean {
  return check.state === 'done' || check.outcome !== 'queued';
}

/** States that hold one of the tenant's maxInFlight upstream slots. */
export const SLOT_STATES: readonly CheckState[] = ['starting', 'creating', 'polling'];

export type CerOutcome = CoverageEligibilityResponse['outcome'];

export interface Check {
  id: string;
  tenantId: string;
  /** `system|value` of CoverageEligibilityRequest.identifier[0], the idempotency key; null when absent. */
  idempotencyKey: string | null;
  payerCode: string;
  isSearchAll: boolean;
  /** `system|value` of the patient identifier used for the check, for search by patient. */
  patientKey: string | null;
  /** The stored CoverageEligibilityRequest (id = check id), as read back by GET. */
  request: CoverageEligibilityRequest;
  /** The create-task body. */
  upstreamRequest: UpstreamTaskRequest;
  state: CheckState;
  upstreamTaskId: string | null;
  /** Last upstream task status seen (IN_QUEUE, NAVIGATING_WEBSITE, ...), for X-Progress. */
  upstreamStatus: string | null;
  /** How many upstream tasks were created for this check (1, or 2 after the retry-once rule). */
  tasksCreated: number;
  /** Consecutive failed polls (5xx, timeout, bad body), reset on a good poll; drives backoff. */
  pollFailures: number;
  /** When the scheduler should next act on the check (epoch ms). */
  nextRunAt: number;
  /** When the check is reported as still checking (CHECK_TIMEOUT_MS / SEARCH_ALL_TIMEOUT_MS), epoch ms. */
  deadlineAt: number;
  leaseOwner: string | null;
  leaseUntil: number | null;
  /** The last upstream envelope (validated JSON), or null before the first good poll. */
  envelope: unknown;
  /** The current CER, updated in place while queued. */
  cer: CoverageEligibilityResponse;
  /** meta.versionId of the CER; bumped on every change of the CER. */
  version: number;
  outcome: CerOutcome;
  /**
   * What $submit answers for the check, decided once when it was written answered (done, or an
   * error while its slot is held); null while it runs.
   */
  answer: CheckAnswer | null;
  /** DELETE /fhir/_async/{id} was called: the async status URL answers 404 from then on. */
  asyncStopped: boolean;
  createdAt: number;
  updatedAt: number;
  /** When create-task answered for the current upstream task (epoch ms); null before (adaptive polling). */
  taskStartedAt: number | null;
  /** Polls of the current upstream task so far, failed ones included (the poll budget). */
  taskPolls: number;
  /** The check's class in its tenant's line (docs/queue.md), decided when it was created. */
  queueClass: QueueClass;
  /** The request's priority (processpriority), as the line reads it. */
  priority: QueuePriority;
  /** The order of background checks (epoch ms): the appointment's start, else arrival + BACKGROUND_DEADLINE_MINUTES. */
  queueDeadlineAt: number;
}

/**
 * The documents of a check: what a step reads only when it starts a task or maps an answer. A
 * claim does not read them (most polls see the same answer as the last and use none of them:
 * bench/README.md, figure 3); the step loads them with `documents` when it needs them.
 */
export type CheckDocuments = Pick<Check, 'request' | 'upstreamRequest' | 'cer' | 'answer'>;
/** A claimed check: the row without its documents (the last envelope is kept: a poll compares it). */
export type ClaimedCheck = Omit<Check, keyof CheckDocuments>;

/** Why the store cannot be used now (outage.ts; a label of store_errors_total). */
export type StoreErrorKind =
  /** No connection: refused, reset, terminated, or none to be had within the connect timeout. */
  | 'connection'
  /** The server is shutting down or starting up (PostgreSQL 57P01-57P03). */
  | 'shutdown'
  /** The disk is full (SQLITE_FULL, PostgreSQL 53100). */
  | 'disk-full'
  /** Other resource exhaustion (PostgreSQL class 53: out of memory, too many connections). */
  | 'resources'
  /** The database only reads (a standby after a failover, a read-only file). */
  | 'read-only'
  /** Another connection holds the write lock past busy_timeout (SQLite). */
  | 'busy'
  /** The file or disk failed (SQLITE_IOERR, SQLITE_CANTOPEN). */
  | 'io';

/** What the store's health looks like now (metrics, /ready). */
export interface StoreHealthReport {
  errors: Record<StoreErrorKind, number>;
  /** Epoch ms of the last write the store took; null before the first. */
  lastWritableAt: number | null;
  /** Epoch ms of the last write that failed on a full disk or with an I/O error; null when none has. */
  lastWriteFailedAt: number | null;
}

/** What `insert` needs; the store fills version (1), lease (none), createdAt and updatedAt. */
export type NewCheck = Omit<
  Check,
  | 'version'
  | 'leaseOwner'
  | 'leaseUntil'
  | 'createdAt'
  | 'updatedAt'
  | 'asyncStopped'
  | 'taskStartedAt'
  | 'taskPolls'
  | keyof QueuePlace
> &
  /** Absent: a desk check of normal priority (mapping/request/queue-place.ts decides it). */
  Partial<QueuePlace> & {
    now: number;
    /**
     * The bare values of patientKey and idempotencyKey (their identifier's value), stored for search:
     * a `|` in the system makes the key's split ambiguous. Absent: the key after its first `|`.
     */
    patientValue?: string | null;
    requestIdentifierValue?: string | null;
  };

/** Fields the scheduler may change. When `cer` is given the version is bumped and updatedAt set. */
export type CheckPatch = Partial<
  Pick<
    Check,
    | 'state'
    | 'upstreamTaskId'
    | 'upstreamStatus'
    | 'tasksCreated'
    | 'pollFailures'
    | 'nextRunAt'
    | 'deadlineAt'
    | 'envelope'
    | 'cer'
    | 'outcome'
    | 'answer'
    | 'taskStartedAt'
    | 'taskPolls'
  >
>;

/** A stored CER as JSON text, with its version (meta.versionId) and last update (epoch ms). */
export interface StoredCer {
  json: string;
  version: number;
  updatedAt: number;
}

/**
 * One value of a token search (https://hl7.org/fhir/R4/search.html#token): `system|value` (system
 * given, '' for "no system"), `value` (any system: system undefined), or `system|` (any value of
 * the system: value undefined).
 */
export interface TokenValue {
  system?: string;
  value?: string;
}

/**
 * A date search on an instant column (search.html#date): the rows whose time is in
 * [from, before), or, with `not`, outside it. Either bound may be absent (open).
 */
export interface DateRange {
  from?: number;
  before?: number;
  not?: boolean;
}

/**
 * The filters of a search. Each list of lists is an AND of ORs: the outer list holds one entry per
 * repetition of the parameter (AND), the inner one its comma-separated values (OR), as in
 * search.html#combining. An inner list is never empty.
 */
export interface SearchFilters {
  /** Check ids (= CER id = CoverageEligibilityRequest id). */
  ids?: string[][];
  /**
   * Stored request ids (`request=`): the check of that id, and the pre-visit re-check of the
   * appointment of that id (docs/previsit.md), whose CER refers to the same request.
   */
  requests?: string[][];
  /** Leave out pre-visit re-checks: a search of stored requests (a re-check has none of its own). */
  ownRequestsOnly?: boolean;
  /** The patient identifier used for the check (patient_key / patient_value). */
  patient?: TokenValue[][];
  /** The request's first identifier, the idempotency key. */
  requestIdentifier?: TokenValue[][];
  /** Payer codes, compared case-insensitively. */
  insurer?: string[][];
  outcome?: CerOutcome[][];
  /** Bounds on createdAt (each one ANDed). */
  created?: DateRange[];
  /** Bounds on updatedAt (each one ANDed). */
  lastUpdated?: DateRange[];
}

/** A sort key of a search; the id in the same direction always follows as the tie-break. */
export interface SearchSort {
  field: 'lastUpdated' | 'created';
  descending: boolean;
}

/** The page of a search. */
export interface SearchPage {
  count: number;
  offset: number;
  /** Default: lastUpdated, newest first. */
  sort?: readonly SearchSort[];
  /** False: no total is counted (`_total=none`); the answer's total is then undefined. */
  total?: boolean;
}

export type GuardKind = 'credentials' | 'backoff';

/**
 * The payer of a guard as it is written: trimmed, upper case (payer codes are upper case in
 * mappings/payers.json and in the upstream's tpa_name). The stores compare it the same way on
 * reading, so "axa" after "AXA" was refused with invalid_credentials meets the same guard.
 */
export function guardPayer(code: string): string {
  return code.trim().toUpperCase();
}

/** A payer-account guard: no upstream calls for tenant+payer while open. */
export interface Guard {
  tenantId: string;
  payerCode: string;
  kind: GuardKind;
  /** Epoch ms when a backoff guard ends; null for credentials (open until an operator resets it). */
  until: number | null;
  reason: string;
  openedAt: number;
}

/** One document of a final answer, as the check's finish schedules it. */
export interface EvidenceItem {
  /** The Binary id (mapping/response/binary.ts): `{checkId}.s`, `.s{n}`, `.d{n}`. */
  id: string;
  /** The portal's label (the DocumentReference's type text). */
  label: string;
  filename: string | null;
  /** From the file name; the download's own type wins when it has a useful one. */
  contentType: string | null;
}

/** What the finish writes with the final CER (UpdateOptions.evidence; evidence-store.ts). */
export interface NewEvidence {
  items: readonly EvidenceItem[];
  /** The first attempt's time (epoch ms). */
  dueAt: number;
}

export interface UpdateOptions {
  /** Drop the lease in the same write (the step ends with it). */
  release?: boolean;
  /**
   * The patch stores the CER's first final version (the check becomes answered): the events of the
   * tenant's matching subscriptions are written in the same transaction (the notification outbox,
   * docs/notifications.md). Needs `base`.
   */
  final?: boolean;
  /**
   * The documents of the final answer to keep (docs/evidence.md): their rows are written in the
   * same transaction, pending, for the capture worker. Needs `base`.
   */
  evidence?: NewEvidence;
}

export interface ClaimOptions {
  owner: string;
  now: number;
  leaseMs: number;
  limit: number;
  /** maxInFlight for a tenant id (checks in SLOT_STATES, across all replicas). */
  maxInFlight: (tenantId: string) => number;
  /**
   * The tenant's slots background checks may not take (docs/queue.md); absent: the default of
   * deskSlotsOf (1 when maxInFlight >= 2).
   */
  deskSlots?: (tenantId: string) => number;
}

/** A tenant's line now: the checks waiting and the checks holding a slot, per class. */
export type QueueCounts = Record<QueueClass, { waiting: number; running: number }>;

/**
 * One entry of a batch (docs/batch-and-reuse.md), in the order of the batch's entries: the check
 * it started or found again (reuse, idempotency), or, for an entry refused before any check, the
 * HTTP status and OperationOutcome a single $submit would have answered.
 */
export interface BatchEntry {
  checkId?: string;
  status?: number;
  outcome?: OperationOutcome;
}

/** A batch of $submit entries (POST /fhir with a Bundle of type batch). */
export interface Batch {
  id: string;
  tenantId: string;
  entries: BatchEntry[];
  createdAt: number;
}

/**
 * One stored audit record: the columns it is searched by; the AuditEvent resource is built from
 * it when read (src/fhir/audit-event.ts), so the rows stay small and cheap to write.
 */
export interface AuditRow {
  id: string;
  /** Epoch ms; the resource's `recorded`. */
  recordedAt: number;
  record: AuditRecord;
}

/** The filters of an AuditEvent search; each list is an OR of values, each range ANDed. */
export interface AuditFilters {
  ids?: string[];
  entity?: string[];
  agent?: string[];
  action?: string[];
  date?: DateRange[];
  /** Only events older than this one (its id), in the search's order: the next page. */
  before?: string;
}

export interface CheckStore {
  readonly kind: 'sqlite' | 'postgres';
  /** FHIR Subscriptions and their events, in the same database (subscription-store.ts). */
  readonly subscriptions: SubscriptionStore;
  /** Creates or upgrades tables. Idempotent; run at start-up. */
  migrate(): Promise<void>;
  /** Throws when the store is unreachable (for /ready). */
  ping(): Promise<void>;
  /** Writes one small row; throws when the store cannot take a write (for /ready). */
  probeWrite(now: number): Promise<void>;
  /** Errors by kind and when the store last took a write (outage.ts); undefined when not tracked. */
  health(): StoreHealthReport | undefined;
  close(): Promise<void>;

  /**
   * Inserts a check. When (tenantId, idempotencyKey) already exists, returns that check with
   * created=false and writes nothing (idempotency: never a second real check).
   */
  insert(check: NewCheck): Promise<{ check: Check; created: boolean }>;
  /** Reads a check of a tenant; another tenant's check is null (the caller answers 404). */
  get(tenantId: string, id: string): Promise<Check | null>;
  /** The CER of a check as its stored JSON text, for the read path (no parse, no re-serialize). */
  getCerJson(tenantId: string, id: string): Promise<StoredCer | null>;
  /** Version and last update of a check's CER only (a cheap probe for caches and 304s). */
  getCerVersion(tenantId: string, id: string): Promise<Omit<StoredCer, 'json'> | null>;

  /**
   * Claims due work with a lease: checks not done, nextRunAt <= now, and no live lease.
   * A `waiting` check is claimed only while its tenant has fewer than maxInFlight checks in
   * SLOT_STATES (counted across replicas, atomically), and is moved to `starting` by the claim
   * itself; waiting checks start in arrival order (createdAt, then id).
   * PostgreSQL uses FOR UPDATE SKIP LOCKED so replicas never claim the same check.
   */
  claimDue(options: ClaimOptions): Promise<ClaimedCheck[]>;
  /** The documents of a check (request, create-task body, CER, answer); null when it is gone. */
  documents(id: string): Promise<CheckDocuments | null>;
  /**
   * Applies a patch if the caller holds the latest claim of the check (lease_owner is its claim
   * token), even when the lease has run out but nobody claimed the check since: a slow answer to
   * create-task is then still stored instead of orphaning a real upstream task. Null when another
   * claim took the check (the caller's step is fenced off). With `base` (the check as the caller
   * holds it), the write applies only while the stored version is still base's (else null), and
   * the result is `base` with the patch applied rather than the row read back: the hot path of
   * polling skips re-reading and re-parsing the documents (a claimed check without documents
   * stays one, with the patch's CER and answer added when it has them).
   * With `options.release`, the same statement drops the lease: the step's last write ends the
   * step, so no separate `release` transaction follows it.
   */
  update<T extends ClaimedCheck = Check>(
    id: string,
    owner: string,
    patch: CheckPatch,
    now: number,
    base?: T,
    options?: UpdateOptions,
  ): Promise<T | null>;
  /**
   * Takes the lease of a check still waiting for the answer of its create-task number
   * `tasksCreated + 1` (state `creating`, `tasksCreated` tasks recorded), whoever holds it now, so
   * that a task id held through a store outage is written even after the lease ran out and the
   * check was claimed again (lifecycle.ts, recordCreatedTask). Null when the check moved on.
   */
  adoptCreating(
    id: string,
    tasksCreated: number,
    owner: string,
    leaseUntil: number,
  ): Promise<ClaimedCheck | null>;
  /** Drops the caller's lease on a check (graceful shutdown, or after acting on it). */
  release(id: string, owner: string): Promise<void>;
  /** Drops every lease this owner holds. */
  releaseAll(owner: string): Promise<void>;
  // (A scheduler claims with tokens `owner:round`; releaseAll(owner) drops all of them.)

  /** Marks a check's async request as no longer tracked (asyncStopped = true); no lease needed. */
  stopAsyncTracking(tenantId: string, id: string): Promise<void>;

  /**
   * Tenant-scoped search, in one query on indexed columns (plus a count when the total does not
   * ride along with the page); newest updatedAt first unless `page.sort` says otherwise, the id
   * as the tie-break so the order is total. Pages are offsets, read one query at a time: between
   * two pages a new check, or (under updatedAt) a queued check updated, moves the rows after it,
   * so a page may repeat or skip one; under createdAt only new checks (and retention's deletes) do.
   */
  search(
    tenantId: string,
    filters: SearchFilters,
    page: SearchPage,
  ): Promise<{ total: number | undefined; checks: Check[] }>;

  /**
   * The newest done check of a tenant for a reuse key (rows.ts reuseKeyOf), answered (updatedAt)
   * at or after `answeredSince`, whatever its outcome; null when none. The caller decides whether
   * it may be reused: only when the newest answer is a found member, so a newer error or
   * member-not-found is never skipped for an older found answer (docs/batch-and-reuse.md).
   */
  findReusable(tenantId: string, reuseKey: string, answeredSince: number): Promise<Check | null>;
  /** A tenant's checks waiting for a slot, and in a slot, now (the dry run's queue report). */
  countQueue(tenantId: string): Promise<{ waiting: number; inFlight: number }>;
  /** The tenant's line per class (waiting, and holding a slot), for the operator view and a queued CER. */
  countQueueByClass(tenantId: string): Promise<QueueCounts>;
  /** Waiting checks of all tenants per class (the eligibility_checks_waiting gauge). */
  countWaitingByClass(): Promise<Record<QueueClass, number>>;
  /** How many of the tenant's waiting checks a new check with this place would start after. */
  countAhead(tenantId: string, place: QueuePlace, createdAt: number): Promise<number>;
  /** Stores a batch (its entries as they were answered). */
  insertBatch(batch: Batch): Promise<void>;
  /** Reads a tenant's batch; another tenant's batch is null. */
  getBatch(tenantId: string, id: string): Promise<Batch | null>;

  getGuard(tenantId: string, payerCode: string): Promise<Guard | null>;
  putGuard(guard: Guard): Promise<void>;
  /** Removes a guard; true when one existed. */
  deleteGuard(tenantId: string, payerCode: string): Promise<boolean>;
  listGuards(): Promise<Guard[]>;

  /** The durations seen for a payer's tasks (adaptive polling); null when none yet. */
  getPayerDurations(payerCode: string): Promise<PayerDurations | null>;
  /**
   * Adds one task's durations (ms) to its payer's history, in one statement per phase, so
   * replicas adding at once lose nothing.
   */
  recordPayerDurations(payerCode: string, durations: TaskDurations, now: number): Promise<void>;

  /** Checks not done whose deadlineAt is before `now` (operator view of stuck checks), oldest first, at most 500. */
  listOverdue(now: number): Promise<Check[]>;
  /** Counts checks per tenant and state (metrics, operator view). */
  countByState(): Promise<Array<{ tenantId: string; state: CheckState; outcome: CerOutcome; count: number }>>;
  /**
   * Deletes done checks whose updatedAt is before the given time (retention), with the batches and
   * the delivered subscription events older than it; returns how many checks. In-flight checks,
   * and events not yet delivered, are never purged. A check with a document kept since
   * `evidenceBefore` (EVIDENCE_RETENTION_DAYS; default: the same time) stays, CER and documents,
   * without its upstream envelope; documents kept before it go (sql-evidence.ts).
   */
  purgeBefore(updatedBefore: number, evidenceBefore?: number): Promise<number>;

  // SMART Backend Services and the audit trail (docs/auth.md).
  /**
   * Remembers a client assertion's `jti` until `expiresAt`, for every replica: true the first
   * time, false when the same client already used it (a replay).
   */
  rememberJti(clientKey: string, jti: string, expiresAt: number, now: number): Promise<boolean>;
  /** Writes a batch of AuditEvents in one transaction. */
  insertAuditEvents(rows: readonly AuditRow[]): Promise<void>;
  /** A tenant's AuditEvents matching the filters, newest first, at most `count`. */
  searchAuditEvents(tenantId: string, filters: AuditFilters, count: number): Promise<AuditRow[]>;
  /** Deletes AuditEvents recorded before the given time (retention); returns how many. */
  purgeAuditBefore(recordedBefore: number): Promise<number>;
}
