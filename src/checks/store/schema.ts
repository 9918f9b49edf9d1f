/**
 * The schema of the check store: one list of migrations, numbered the same on SQLite and on
 * PostgreSQL, applied in order once each and recorded in schema_migrations. Only column types
 * differ between the two databases; they come from the driver's dialect.
 */
import type { CoverageEligibilityRequest, CoverageEligibilityResponse } from 'fhir/r4.js';
import { decideAnswer } from '../../mapping/response/answer.js';
import { askedOf } from '../../mapping/response/base.js';
import { withNarrative } from '../../mapping/response/narrative.js';
import { bool, int, text } from './rows.js';
import type { ColumnTypes, Dialect, Statement, StoreKind, Work } from './driver.js';

/**
 * The order in which a tenant's waiting checks are started (docs/queue.md): desk before background,
 * `stat` before the rest, then the deadline (a desk check's is its arrival), then arrival. The
 * claim query's ORDER BY and the queue index say it the same way, so the index serves it.
 */
export const QUEUE_ORDER =
  "queue_class DESC, (CASE WHEN priority = 'stat' THEN 0 ELSE 1 END), queue_deadline_at, created_at, id";

/** A migration: its statements, one each, for a database's column types. */
export type Migration = (t: ColumnTypes) => readonly string[];

/** The migration after which every stored CER without a narrative gets one (addNarratives). */
const NARRATIVES: Migration = () => [];
/** The migration after which every stored narrative is rendered again (renderNarratives). */
const NARRATIVES_AGAIN: Migration = () => [];

const MIGRATIONS: readonly Migration[] = [
  // 1: the checks and the payer guards. The indexes of checks serve the claim query, per-tenant
  // slot counts in arrival order, idempotency, patient search, _lastUpdated, overdue and lease views.
  (t) => [
    `CREATE TABLE checks (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    idempotency_key TEXT,
    payer_code TEXT NOT NULL,
    is_search_all ${t.bool} NOT NULL,
    patient_key TEXT,
    patient_value TEXT,
    request ${t.json} NOT NULL,
    upstream_request ${t.json} NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('waiting', 'starting', 'creating', 'polling', 'done')),
    upstream_task_id TEXT,
    upstream_status TEXT,
    tasks_created INTEGER NOT NULL,
    poll_failures INTEGER NOT NULL,
    next_run_at ${t.bigint} NOT NULL,
    deadline_at ${t.bigint} NOT NULL,
    lease_owner TEXT,
    lease_until ${t.bigint},
    envelope ${t.json},
    cer ${t.json} NOT NULL,
    version INTEGER NOT NULL,
    outcome TEXT NOT NULL,
    async_stopped ${t.bool} NOT NULL DEFAULT ${t.false},
    created_at ${t.bigint} NOT NULL,
    updated_at ${t.bigint} NOT NULL
  )`,
    'CREATE INDEX checks_claim_idx ON checks (state, next_run_at)',
    'CREATE INDEX checks_tenant_state_idx ON checks (tenant_id, state, created_at, id)',
    `CREATE UNIQUE INDEX checks_idempotency_idx ON checks (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL`,
    'CREATE INDEX checks_patient_key_idx ON checks (tenant_id, patient_key)',
    'CREATE INDEX checks_patient_value_idx ON checks (tenant_id, patient_value)',
    'CREATE INDEX checks_updated_idx ON checks (tenant_id, updated_at)',
    "CREATE INDEX checks_overdue_idx ON checks (deadline_at) WHERE state <> 'done'",
    'CREATE INDEX checks_lease_owner_idx ON checks (lease_owner) WHERE lease_owner IS NOT NULL',
    `CREATE TABLE payer_guards (
    tenant_id TEXT NOT NULL,
    payer_code TEXT NOT NULL,
    kind TEXT NOT NULL CHECK (kind IN ('credentials', 'backoff')),
    until_at ${t.bigint},
    reason TEXT NOT NULL,
    opened_at ${t.bigint} NOT NULL,
    PRIMARY KEY (tenant_id, payer_code)
  )`,
  ],
  // 2: the retention purge (done checks by age) without a full scan.
  () => ['CREATE INDEX checks_purge_idx ON checks (state, updated_at)'],
  // 3: the claim query answered from the index alone (13 ms -> 0.25 ms on 10,000 rows, bench/README.md).
  () => ['CREATE INDEX checks_claim_cover_idx ON checks (state, next_run_at, lease_until, created_at, id)'],
  // 4: SQLite only: the read path's version probe (getCerVersion) from the index alone. There
  // version and updated_at come after the JSON columns, so reading them from the table walks a
  // 40-55 KB row's overflow pages on every GET of a CER. PostgreSQL keeps large JSON out of line
  // (TOAST): its row is small, and one more index would only cost every write.
  (t) =>
    t.kind === 'sqlite'
      ? ['CREATE INDEX checks_version_idx ON checks (tenant_id, id, version, updated_at)']
      : [],
  // 5: fewer indexes to keep up on every claim, release and poll write: checks_claim_idx is a
  // prefix of checks_claim_cover_idx, and no query can use checks_lease_owner_idx (releaseAll
  // matches claim tokens by prefix; update finds the row by its primary key).
  () => ['DROP INDEX IF EXISTS checks_claim_idx', 'DROP INDEX IF EXISTS checks_lease_owner_idx'],
  // 6: the answer of a check ($submit's status and body), decided once when the check is written
  // answered; checks answered before this migration get theirs right after it (decideAnswers).
  (t) => [`ALTER TABLE checks ADD COLUMN answer ${t.json}`],
  // 7: search (docs/search.md): the request identifier's bare value in its own column, as
  // patient_value is the patient key's, so `request.identifier=value` is an indexed equality
  // (`system|value` uses checks_idempotency_idx); filled for the rows already stored; and the
  // check's creation time (`created`) indexed like updated_at.
  (t) => [
    'ALTER TABLE checks ADD COLUMN request_identifier_value TEXT',
    `UPDATE checks SET request_identifier_value =
       substr(idempotency_key, ${t.kind === 'sqlite' ? 'instr' : 'strpos'}(idempotency_key, '|') + 1)
     WHERE idempotency_key IS NOT NULL`,
    'CREATE INDEX checks_request_identifier_idx ON checks (tenant_id, request_identifier_value)',
    'CREATE INDEX checks_created_idx ON checks (tenant_id, created_at)',
  ],
  // 8 (issue 15, notifications; docs/notifications.md): FHIR Subscriptions and their events. An
  // event row is the outbox, written in the transaction of the CER's first final version; the
  // delivery state (claimed with a lease) is on the subscription row. The claim index serves the
  // delivery worker's due query, the tenant index search by status.
  (t) => [
    `CREATE TABLE subscriptions (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    topic TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('requested', 'active', 'error', 'off')),
    resource ${t.json} NOT NULL,
    filter ${t.json} NOT NULL,
    events_count ${t.bigint} NOT NULL,
    delivered_through ${t.bigint} NOT NULL,
    handshake_due ${t.bool} NOT NULL,
    next_attempt_at ${t.bigint} NOT NULL,
    heartbeat_at ${t.bigint},
    failures INTEGER NOT NULL,
    failing_since ${t.bigint},
    last_error TEXT,
    end_at ${t.bigint},
    lease_owner TEXT,
    lease_until ${t.bigint},
    created_at ${t.bigint} NOT NULL,
    updated_at ${t.bigint} NOT NULL
  )`,
    'CREATE INDEX subscriptions_tenant_idx ON subscriptions (tenant_id, status, created_at)',
    'CREATE INDEX subscriptions_due_idx ON subscriptions (status, next_attempt_at)',
    `CREATE TABLE subscription_events (
    subscription_id TEXT NOT NULL,
    event_number ${t.bigint} NOT NULL,
    tenant_id TEXT NOT NULL,
    check_id TEXT NOT NULL,
    cer_version INTEGER NOT NULL,
    occurred_at ${t.bigint} NOT NULL,
    PRIMARY KEY (subscription_id, event_number)
  )`,
  ],
  // 9 (issue 16): no schema change; every stored CER without a narrative gets one right after it
  // (addNarratives), so every CER the service serves carries `text`.
  NARRATIVES,
  // 10 (issue 17, docs/batch-and-reuse.md): reuse of recent answers and batches. reuse_key is what
  // makes two checks ask the same question (payer, visit type, patient identifier), written on
  // insert; the index finds the newest answer of a tenant for it. Rows stored before this
  // migration have none and are never reused (they are older than any reuse window soon enough).
  // A batch is one row: its entries (check ids and the answers of refused entries) in order.
  (t) => [
    'ALTER TABLE checks ADD COLUMN reuse_key TEXT',
    'CREATE INDEX checks_reuse_idx ON checks (tenant_id, reuse_key, updated_at)',
    `CREATE TABLE batches (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    entries ${t.json} NOT NULL,
    created_at ${t.bigint} NOT NULL
  )`,
    'CREATE INDEX batches_created_idx ON batches (created_at)',
  ],
  // 11 (issue 18, SMART Backend Services and AuditEvent; docs/auth.md): the `jti` of every client
  // assertion until it expires, shared by all replicas so a replayed assertion is refused by any
  // of them; and the audit trail, searched per tenant by time, entity, agent and action.
  (t) => [
    `CREATE TABLE assertion_jtis (
    client_key TEXT NOT NULL,
    jti TEXT NOT NULL,
    expires_at ${t.bigint} NOT NULL,
    PRIMARY KEY (client_key, jti)
  )`,
    'CREATE INDEX assertion_jtis_expires_idx ON assertion_jtis (expires_at)',
    `CREATE TABLE audit_events (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    recorded_at ${t.bigint} NOT NULL,
    action TEXT NOT NULL,
    interaction TEXT NOT NULL,
    operation TEXT,
    agent TEXT NOT NULL,
    agent_kind TEXT NOT NULL,
    entity TEXT,
    outcome TEXT NOT NULL,
    outcome_desc TEXT
  )`,
    'CREATE INDEX audit_events_tenant_time_idx ON audit_events (tenant_id, recorded_at, id)',
    // The ids begin with the recording time (audit-store.ts), so the primary key serves the
    // retention purge and takes new rows at its end: one index fewer to keep up on every write.
    'CREATE INDEX audit_events_entity_idx ON audit_events (tenant_id, entity)',
  ],
  // 12 (issue 19, adaptive polling, docs/polling.md): when the current upstream task was created and
  // how many polls it has had (the poll budget), and the durations seen per payer, shared by
  // replicas and kept across restarts (a log-normal fit per payer and phase).
  (t) => [
    `ALTER TABLE checks ADD COLUMN task_started_at ${t.bigint}`,
    'ALTER TABLE checks ADD COLUMN task_polls INTEGER NOT NULL DEFAULT 0',
    `CREATE TABLE payer_durations (
    payer_code TEXT NOT NULL,
    phase TEXT NOT NULL CHECK (phase IN ('pre_extract', 'extract')),
    samples INTEGER NOT NULL,
    mean_log ${t.kind === 'sqlite' ? 'REAL' : 'DOUBLE PRECISION'} NOT NULL,
    var_log ${t.kind === 'sqlite' ? 'REAL' : 'DOUBLE PRECISION'} NOT NULL,
    updated_at ${t.bigint} NOT NULL,
    PRIMARY KEY (payer_code, phase)
  )`,
  ],
  // 13 (issue 19): the counts by state and outcome (the `checks` gauge of /metrics) and by outcome
  // (`outcome=` searches, their totals) from an index alone. SQLite keeps a row's columns in one
  // record, and `outcome` comes after the envelope and the CER (60 KB over about fifteen overflow
  // pages, which SQLite follows one by one to reach a later column): without it, a /metrics scrape
  // read every stored page, 77 ms for 4,000 checks and about 2 s for 100,000, on the event loop
  // (bench/README.md, figure 1). PostgreSQL keeps such values out of line, and gains the same count.
  () => ['CREATE INDEX checks_outcome_idx ON checks (tenant_id, state, outcome)'],
  // 14 (issue 26, pre-visit checks; docs/previsit.md): appointments. One row per stored request
  // whose service starts in the future: its request and what a check of it needs, its booking
  // answer, and its pending re-check, claimed with a lease (the due index serves the claim, the
  // start index the `serviced` search, the key index idempotency of a booking answered by reuse).
  (t) => [
    `CREATE TABLE appointments (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    idempotency_key TEXT,
    input ${t.json} NOT NULL,
    booking_check_id TEXT NOT NULL,
    recheck_id TEXT,
    start_at ${t.bigint} NOT NULL,
    due_at ${t.bigint} NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('scheduled', 'rechecked', 'skipped', 'cancelled')),
    lease_owner TEXT,
    lease_until ${t.bigint},
    created_at ${t.bigint} NOT NULL,
    updated_at ${t.bigint} NOT NULL
  )`,
    'CREATE INDEX appointments_due_idx ON appointments (state, due_at)',
    'CREATE INDEX appointments_start_idx ON appointments (tenant_id, start_at)',
    'CREATE INDEX appointments_booking_idx ON appointments (booking_check_id)',
    'CREATE INDEX appointments_recheck_idx ON appointments (recheck_id)',
    `CREATE UNIQUE INDEX appointments_idempotency_idx ON appointments (tenant_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL`,
  ],
  // 15 (issue 29, docs/operations.md "When the store fails"): one row that /ready writes, so a store
  // that reads but cannot write (a full disk, a standby after a failover) is found not ready.
  (t) => [`CREATE TABLE store_probe (id INTEGER PRIMARY KEY, written_at ${t.bigint} NOT NULL)`],
  // 16 (issue 28, docs/front-desk.md): no schema change; every stored CER's narrative is rendered
  // again by the current function (renderNarratives): the visit summary first, the tables per
  // portal block, no table for a coverage not in force. Stored answers are what a desk re-opens
  // within the retention window, so they read as new ones do.
  NARRATIVES_AGAIN,
  // 17 (issue 34, docs/signin.md): the sessions of people signed in to the page, found by the
  // SHA-256 of their id (the cookie), shared by every replica and kept across restarts; the sign-ins
  // under way (state -> nonce and PKCE verifier), taken once; the person an AuditEvent names.
  (t) => [
    `CREATE TABLE sessions (
    id_hash TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    person ${t.json} NOT NULL,
    roles ${t.json} NOT NULL,
    csrf_token TEXT NOT NULL,
    data ${t.json} NOT NULL,
    created_at ${t.bigint} NOT NULL,
    last_seen_at ${t.bigint} NOT NULL,
    expires_at ${t.bigint} NOT NULL
  )`,
    'CREATE INDEX sessions_expires_idx ON sessions (expires_at)',
    `CREATE TABLE pending_logins (
    state_hash TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    data ${t.json} NOT NULL,
    expires_at ${t.bigint} NOT NULL
  )`,
    'CREATE INDEX pending_logins_expires_idx ON pending_logins (expires_at)',
    `ALTER TABLE audit_events ADD COLUMN person ${t.json}`,
  ],
  // 18 (issue 36, docs/evidence.md): the documents of final answers, kept. One row per document
  // (its Binary id), claimed with a lease while pending (the due index); searched by patient and
  // by check; the bytes once per SHA-256 in evidence_blobs.
  (t) => [
    `CREATE TABLE evidence (
    id TEXT PRIMARY KEY,
    tenant_id TEXT NOT NULL,
    check_id TEXT NOT NULL,
    patient_key TEXT,
    patient_value TEXT,
    label TEXT NOT NULL,
    filename TEXT,
    content_type TEXT,
    state TEXT NOT NULL CHECK (state IN ('pending', 'kept', 'failed')),
    reason TEXT,
    attempts INTEGER NOT NULL,
    next_run_at ${t.bigint} NOT NULL,
    lease_owner TEXT,
    lease_until ${t.bigint},
    sha256 TEXT,
    sha1 TEXT,
    size ${t.bigint},
    created_at ${t.bigint} NOT NULL,
    kept_at ${t.bigint}
  )`,
    'CREATE INDEX evidence_due_idx ON evidence (state, next_run_at)',
    'CREATE INDEX evidence_check_idx ON evidence (check_id)',
    'CREATE INDEX evidence_patient_idx ON evidence (tenant_id, patient_value)',
    'CREATE INDEX evidence_kept_idx ON evidence (tenant_id, kept_at)',
    'CREATE INDEX evidence_sha_idx ON evidence (sha256)',
    `CREATE TABLE evidence_blobs (
    sha256 TEXT PRIMARY KEY,
    bytes ${t.bytes} NOT NULL,
    size ${t.bigint} NOT NULL,
    created_at ${t.bigint} NOT NULL
  )`,
  ],
  // 19 (issue 41, docs/queue.md): the desk first. A check's class (desk or background), its
  // request's priority and its place among background work (queue_deadline_at), decided once when
  // it is created; rows stored before are desk checks of normal priority in arrival order. The
  // index holds the waiting rows only, in the order the claim query starts them.
  (t) => [
    "ALTER TABLE checks ADD COLUMN queue_class TEXT NOT NULL DEFAULT 'desk' CHECK (queue_class IN ('desk', 'background'))",
    "ALTER TABLE checks ADD COLUMN priority TEXT NOT NULL DEFAULT 'normal' CHECK (priority IN ('stat', 'normal', 'deferred'))",
    `ALTER TABLE checks ADD COLUMN queue_deadline_at ${t.bigint}`,
    // Only the rows still running are ordered; a finished one reads its arrival (rows.ts).
    "UPDATE checks SET queue_deadline_at = created_at WHERE state <> 'done'",
    `CREATE INDEX checks_queue_idx ON checks (tenant_id, ${QUEUE_ORDER}) WHERE state = 'waiting'`,
  ],
  // 20 (issue 42, docs/ehr-schedule.md): the EHR's schedule. Per tenant, one row of its rounds
  // (when the next is due, the lease that gives a round to one replica, how the last went); per
  // appointment read from the EHR, what it was when last read (start, status), the stored requests
  // booked for it, or why it could not be checked (listed on the page, by its start).
  (t) => [
    `CREATE TABLE ehr_schedule_rounds (
    id TEXT PRIMARY KEY,
    next_run_at ${t.bigint} NOT NULL,
    lease_owner TEXT,
    lease_until ${t.bigint},
    last_at ${t.bigint},
    last_outcome TEXT,
    last_counts ${t.json},
    last_problem TEXT
  )`,
    `CREATE TABLE ehr_schedule_entries (
    tenant_id TEXT NOT NULL,
    appointment_url TEXT NOT NULL,
    start_at ${t.bigint} NOT NULL,
    status TEXT NOT NULL,
    request_ids ${t.json} NOT NULL,
    reason TEXT,
    patient_name TEXT,
    updated_at ${t.bigint} NOT NULL,
    PRIMARY KEY (tenant_id, appointment_url)
  )`,
    'CREATE INDEX ehr_schedule_entries_start_idx ON ehr_schedule_entries (tenant_id, start_at)',
  ],
];

/** The migration after which the answers of rows finished before it are decided once. */
const ANSWER_MIGRATION = 6;
/** Its number, wherever it sits in the list. */
const NARRATIVE_MIGRATION = MIGRATIONS.indexOf(NARRATIVES) + 1;
const NARRATIVE_AGAIN_MIGRATION = MIGRATIONS.indexOf(NARRATIVES_AGAIN) + 1;

/**
 * The previous release (55c4503 and before) numbered its migrations per database, in a table
 * store_migrations: SQLite's 1-5 are this list's 1-5; PostgreSQL had no version index, so its 4
 * (the index drop) is 5 here. Index: the last version that release recorded; value: the last
 * version of this list the database is at. store_migrations is left as it was: the previous
 * release still starts on an upgraded database (the schema is the same).
 */
const PREVIOUS_RELEASE_VERSIONS: Record<StoreKind, readonly number[]> = {
  sqlite: [0, 1, 2, 3, 4, 5],
  postgres: [0, 1, 2, 3, 5],
};

/** Creates or upgrades the tables, in one transaction (the driver's). */
export function* migration(dialect: Dialect): Work<void> {
  const { types } = dialect;
  const run = (sql: string, ...params: unknown[]): Statement => ({ sql, params });
  for (const statement of dialect.migrationStart()) yield statement;
  yield run(
    `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at ${types.bigint} NOT NULL)`,
  );
  const { rows } = yield run('SELECT version FROM schema_migrations');
  const applied = new Set(rows.map((row) => int(row, 'version')));
  const record = (version: number): Statement =>
    run('INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)', version, Date.now());
  if (applied.size === 0 && (yield dialect.tableExists('store_migrations')).rows.length > 0) {
    // A database of the previous release: its versions, translated once.
    const [last] = (yield run('SELECT COALESCE(MAX(version), 0) AS version FROM store_migrations')).rows;
    const upTo = PREVIOUS_RELEASE_VERSIONS[types.kind][last ? int(last, 'version') : 0];
    if (upTo === undefined) throw new Error('store_migrations holds a version this release does not know');
    for (let version = 1; version <= upTo; version += 1) {
      applied.add(version);
      yield record(version);
    }
  }
  for (const [index, statements] of MIGRATIONS.entries()) {
    if (applied.has(index + 1)) continue;
    for (const sql of statements(types)) yield run(sql);
    if (index + 1 === ANSWER_MIGRATION) yield* decideAnswers(dialect);
    if (index + 1 === NARRATIVE_MIGRATION) yield* addNarratives(dialect);
    if (index + 1 === NARRATIVE_AGAIN_MIGRATION) yield* renderNarratives(dialect);
    yield record(index + 1);
  }
}

/**
 * The answers of checks a previous release finished (it decided them again on every read):
 * decided once, by the same function the lifecycle uses, in the migration's transaction.
 */
function* decideAnswers(dialect: Dialect): Work<void> {
  const { rows } = yield {
    sql: `SELECT id, cer, envelope, is_search_all FROM checks WHERE state = 'done' OR outcome <> 'queued'`,
    params: [],
  };
  for (const row of rows) {
    const cer = dialect.readJson(row.cer) as CoverageEligibilityResponse;
    const envelope = row.envelope === null ? null : dialect.readJson(row.envelope);
    const answer = decideAnswer(cer, envelope, bool(row, 'is_search_all'));
    yield {
      sql: `UPDATE checks SET answer = ${dialect.json('$1')} WHERE id = $2`,
      params: [JSON.stringify(answer), text(row, 'id')],
    };
  }
}

/**
 * The narrative of every CER stored before narratives existed, built by the same function the
 * mapper uses, in the migration's transaction. A changed CER is a new version (meta.versionId and
 * the version column move on together), so a client's ETag of the old one no longer matches.
 */
function* addNarratives(dialect: Dialect): Work<void> {
  yield* eachNarrative(dialect, (cer) => cer.text === undefined);
}

/**
 * The narrative of every stored CER rendered again by the current function (migration 16), from
 * the CER and the categories its stored request asked; a CER whose narrative comes out the same is
 * left as it is (same version, same ETag).
 */
function* renderNarratives(dialect: Dialect): Work<void> {
  yield* eachNarrative(dialect, () => true);
}

/**
 * The CERs `pick` chooses, their narrative built by the same function the mapper uses, in the
 * migration's transaction. A changed CER is a new version (meta.versionId and the version column
 * move on together), so a client's ETag of the old one no longer matches.
 */
function* eachNarrative(dialect: Dialect, pick: (cer: CoverageEligibilityResponse) => boolean): Work<void> {
  // In pages by id, so a large store (100,000 checks of 40-60 KB each) is never held in memory.
  let after = '';
  for (;;) {
    const { rows } = yield {
      sql: 'SELECT id, cer, request, version FROM checks WHERE id > $1 ORDER BY id LIMIT $2',
      params: [after, NARRATIVE_PAGE],
    };
    for (const row of rows) {
      const cer = dialect.readJson(row.cer) as CoverageEligibilityResponse;
      if (!pick(cer)) continue;
      const request = dialect.readJson(row.request) as CoverageEligibilityRequest;
      const version = int(row, 'version') + 1;
      const updated = withNarrative(
        { ...cer, meta: { ...cer.meta, versionId: String(version) } },
        askedOf(request),
      );
      if (updated.text?.div === cer.text?.div) continue;
      yield {
        sql: `UPDATE checks SET cer = ${dialect.json('$1')}, version = $2 WHERE id = $3`,
        params: [JSON.stringify(updated), version, text(row, 'id')],
      };
    }
    if (rows.length < NARRATIVE_PAGE) return;
    after = text(rows[rows.length - 1]!, 'id');
  }
}

/** Rows read at a time by the narrative backfill. */
const NARRATIVE_PAGE = 200;
