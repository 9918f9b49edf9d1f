/**
 * The evidence store on SQLite and PostgreSQL (evidence-store.ts), on the check store's driver,
 * and the retention purge of checks, which keeps a check with kept documents (and its CER) for
 * EVIDENCE_RETENTION_DAYS. The bytes are one row per SHA-256 in evidence_blobs: a screenshot the
 * portal serves again for another check is stored once.
 */
import type { ClaimedCheck } from './check-store.js';
import { EVIDENCE_STATES, NOT_KEPT_REASONS } from './evidence-store.js';
import type {
  CerNote,
  Evidence,
  EvidenceClaim,
  EvidenceFilters,
  EvidenceStore,
  EvidenceUsage,
  KeptBytes,
  KeptDocument,
  NewEvidence,
  NotKeptReason,
} from './evidence-store.js';
import { int, nullableInt, nullableText, oneOf, patientValueOf, stampCer, text } from './rows.js';
import type { Row } from './rows.js';
import type { Dialect, SqlDriver, Work } from './driver.js';
import { Params, one, query, rangeCondition } from './driver.js';
import { claimLeased, releaseOwner } from './sql-leases.js';

/** A due, unleased, pending row; $1 is now. */
const DUE = `state = 'pending' AND next_run_at <= $1 AND (lease_until IS NULL OR lease_until <= $1)`;
/** The columns of a row without the bytes. */
const COLUMNS = `id, tenant_id, check_id, label, filename, content_type, state, reason, attempts, next_run_at,
  lease_owner, sha256, sha1, size, created_at, kept_at`;

function rowToEvidence(row: Row): Evidence {
  const reason = nullableText(row, 'reason');
  return {
    id: text(row, 'id'),
    tenantId: text(row, 'tenant_id'),
    checkId: text(row, 'check_id'),
    label: text(row, 'label'),
    filename: nullableText(row, 'filename'),
    contentType: nullableText(row, 'content_type'),
    state: oneOf(row, 'state', EVIDENCE_STATES),
    reason: reason === null ? null : oneOf(row, 'reason', NOT_KEPT_REASONS),
    attempts: int(row, 'attempts'),
    nextRunAt: int(row, 'next_run_at'),
    leaseOwner: nullableText(row, 'lease_owner'),
    sha256: nullableText(row, 'sha256'),
    sha1: nullableText(row, 'sha1'),
    size: nullableInt(row, 'size'),
    createdAt: int(row, 'created_at'),
    keptAt: nullableInt(row, 'kept_at'),
  };
}

/** The rows of a final answer's documents, written in the transaction of its first final version. */
export function* schedulingEvidence(check: ClaimedCheck, evidence: NewEvidence, now: number): Work<void> {
  for (const item of evidence.items) {
    yield* one(
      `INSERT INTO evidence (id, tenant_id, check_id, patient_key, patient_value, label, filename,
         content_type, state, reason, attempts, next_run_at, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', NULL, 0, $9, $10)
       ON CONFLICT (id) DO NOTHING`,
      [
        item.id,
        check.tenantId,
        check.id,
        check.patientKey,
        patientValueOf(check.patientKey),
        item.label,
        item.filename,
        item.contentType,
        evidence.dueAt,
        now,
      ],
    );
  }
}

/**
 * Retention (maintenance.ts): done checks older than `updatedBefore` go, with their batches and
 * delivered events, except a check with a document kept since `evidenceBefore`: its row (and
 * CER) stays until then, without its last upstream envelope. Kept documents older than
 * `evidenceBefore` go, and the bytes no row names any more. Returns how many checks went.
 */
export function* purging(updatedBefore: number, evidenceBefore: number): Work<number> {
  yield* one(`DELETE FROM evidence WHERE state = 'kept' AND kept_at < $1`, [evidenceBefore]);
  const kept = `EXISTS (SELECT 1 FROM evidence e WHERE e.check_id = checks.id AND e.state = 'kept')`;
  // Only finished checks: purging an unfinished one would lose a check a client is still waiting for.
  const purged = (yield* one(`DELETE FROM checks WHERE state = 'done' AND updated_at < $1 AND NOT ${kept}`, [
    updatedBefore,
  ])).changed;
  // What RETENTION_DAYS removes of a check kept for its evidence: the upstream's raw answer.
  yield* one(
    `UPDATE checks SET envelope = NULL WHERE state = 'done' AND updated_at < $1 AND envelope IS NOT NULL AND ${kept}`,
    [updatedBefore],
  );
  yield* one('DELETE FROM evidence WHERE NOT EXISTS (SELECT 1 FROM checks c WHERE c.id = evidence.check_id)');
  yield* one(
    'DELETE FROM evidence_blobs WHERE NOT EXISTS (SELECT 1 FROM evidence e WHERE e.sha256 = evidence_blobs.sha256)',
  );
  // A batch is kept as long as the checks it lists may be (its entries name them by id).
  yield* one('DELETE FROM batches WHERE created_at < $1', [updatedBefore]);
  // Subscription events already delivered (numbering is events_count on the subscription, so it
  // goes on); an undelivered one is kept however old, until it is sent or its subscription deleted.
  yield* one(
    `DELETE FROM subscription_events WHERE occurred_at < $1 AND event_number <= (
       SELECT s.delivered_through FROM subscriptions s WHERE s.id = subscription_events.subscription_id)`,
    [updatedBefore],
  );
  return purged;
}

/**
 * The check's CER as `note` gives it (the narrative says what became of a document), as the next
 * version of `note.version`, in the transaction of the document's row. Throws when the CER moved
 * on meanwhile: the transaction is rolled back, the row stays pending and is decided again.
 */
function* rewritingCer(json: Dialect['json'], id: string, note: CerNote, now: number): Work<void> {
  const version = note.version + 1;
  const rewritten = yield* one(
    `UPDATE checks SET cer = ${json('$1')}, version = $2, updated_at = $3
     WHERE id = (SELECT check_id FROM evidence WHERE id = $4) AND version = $5`,
    [JSON.stringify(stampCer(note.cer, version, now)), version, now, id, note.version],
  );
  if (rewritten.changed !== 1) throw new Error('the CER moved on while a document was noted in it');
}

export class SqlEvidenceStore implements EvidenceStore {
  private readonly dialect: Dialect;

  constructor(private readonly driver: SqlDriver) {
    this.dialect = driver.dialect;
  }

  async claimDue({ owner, now, leaseMs, limit }: EvidenceClaim): Promise<Evidence[]> {
    if (limit <= 0) return [];
    const rows = await claimLeased(this.driver, {
      table: 'evidence',
      due: DUE,
      dueParams: [now],
      order: 'next_run_at, id',
      columns: COLUMNS,
      owner,
      leaseUntil: now + leaseMs,
      limit,
    });
    return rows.map(rowToEvidence).sort((a, b) => a.nextRunAt - b.nextRunAt || a.id.localeCompare(b.id));
  }

  keep(id: string, owner: string, kept: KeptBytes, now: number, note?: CerNote): Promise<boolean> {
    const { json } = this.dialect;
    const work = function* (): Work<boolean> {
      yield* one(
        `INSERT INTO evidence_blobs (sha256, bytes, size, created_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (sha256) DO NOTHING`,
        [kept.sha256, kept.bytes, kept.bytes.length, now],
      );
      const result = yield* one(
        `UPDATE evidence SET state = 'kept', sha256 = $3, sha1 = $4, size = $5,
           content_type = COALESCE($6, content_type), kept_at = $7, attempts = attempts + 1,
           lease_owner = NULL, lease_until = NULL
         WHERE id = $1 AND lease_owner = $2 AND state = 'pending'`,
        [id, owner, kept.sha256, kept.sha1, kept.bytes.length, kept.contentType, now],
      );
      if (result.changed === 1 && note) yield* rewritingCer(json, id, note, now);
      return result.changed === 1;
    };
    // PostgreSQL runs a write statement by statement: the blob and its row commit together.
    return this.driver.run(this.dialect.types.kind === 'postgres' ? 'transaction' : 'write', work());
  }

  retry(id: string, owner: string, nextRunAt: number, now: number, note?: CerNote): Promise<boolean> {
    const { json } = this.dialect;
    const work = function* (): Work<boolean> {
      const result = yield* one(
        `UPDATE evidence SET next_run_at = $3, attempts = attempts + 1, lease_owner = NULL, lease_until = NULL
         WHERE id = $1 AND lease_owner = $2 AND state = 'pending'`,
        [id, owner, nextRunAt],
      );
      if (result.changed === 1 && note) yield* rewritingCer(json, id, note, now);
      return result.changed === 1;
    };
    return this.driver.run(this.dialect.types.kind === 'postgres' ? 'transaction' : 'write', work());
  }

  fail(id: string, owner: string, reason: NotKeptReason, now: number, note?: CerNote): Promise<boolean> {
    const { json } = this.dialect;
    const work = function* (): Work<boolean> {
      const failed = yield* one(
        `UPDATE evidence SET state = 'failed', reason = $3, next_run_at = $4, attempts = attempts + 1,
           lease_owner = NULL, lease_until = NULL
         WHERE id = $1 AND lease_owner = $2 AND state = 'pending'`,
        [id, owner, reason, now],
      );
      if (failed.changed === 1 && note) yield* rewritingCer(json, id, note, now);
      return failed.changed === 1;
    };
    return this.driver.run(this.dialect.types.kind === 'postgres' ? 'transaction' : 'write', work());
  }

  async get(tenantId: string, id: string): Promise<Evidence | null> {
    const [row] = await this.rows(`SELECT ${COLUMNS} FROM evidence WHERE tenant_id = $1 AND id = $2`, [
      tenantId,
      id,
    ]);
    return row ? rowToEvidence(row) : null;
  }

  async read(tenantId: string, id: string): Promise<KeptDocument | null> {
    const [row] = await this.rows(
      `SELECT e.id, e.tenant_id, e.check_id, e.label, e.filename, e.content_type, e.state, e.reason,
         e.attempts, e.next_run_at, e.lease_owner, e.sha256, e.sha1, e.size, e.created_at, e.kept_at, b.bytes
       FROM evidence e JOIN evidence_blobs b ON b.sha256 = e.sha256
       WHERE e.tenant_id = $1 AND e.id = $2 AND e.state = 'kept'`,
      [tenantId, id],
    );
    if (!row) return null;
    const bytes = row.bytes;
    if (!Buffer.isBuffer(bytes)) throw new Error('evidence_blobs.bytes: not bytes');
    return { evidence: rowToEvidence(row), bytes };
  }

  async ofCheck(tenantId: string, checkId: string): Promise<Evidence[]> {
    const rows = await this.rows(
      `SELECT ${COLUMNS} FROM evidence WHERE tenant_id = $1 AND check_id = $2 ORDER BY id`,
      [tenantId, checkId],
    );
    return rows.map(rowToEvidence);
  }

  async search(
    tenantId: string,
    filters: EvidenceFilters,
    count: number,
    offset: number,
  ): Promise<Evidence[]> {
    const params = new Params();
    const where = [`tenant_id = ${params.add(tenantId)}`, "state = 'kept'"];
    if (filters.patient?.length) {
      const one = filters.patient.map((token) =>
        token.system === undefined
          ? `patient_value = ${params.add(token.value ?? '')}`
          : `(patient_key = ${params.add(`${token.system}|${token.value ?? ''}`)} AND patient_value = ${params.add(token.value ?? '')})`,
      );
      where.push(`(${one.join(' OR ')})`);
    }
    if (filters.checkIds?.length)
      where.push(`check_id IN (${filters.checkIds.map((id) => params.add(id)).join(', ')})`);
    for (const range of filters.keptAt ?? []) where.push(rangeCondition(params, 'kept_at', range));
    const rows = await this.rows(
      `SELECT ${COLUMNS} FROM evidence WHERE ${where.join(' AND ')}
       ORDER BY kept_at DESC, id LIMIT ${params.add(count)} OFFSET ${params.add(offset)}`,
      params.values,
    );
    return rows.map(rowToEvidence);
  }

  async usage(): Promise<EvidenceUsage> {
    const [kept] = await this.rows(`SELECT COUNT(*) AS count FROM evidence WHERE state = 'kept'`);
    const [blobs] = await this.rows(
      'SELECT COUNT(*) AS count, COALESCE(SUM(size), 0) AS bytes FROM evidence_blobs',
    );
    return {
      kept: kept ? int(kept, 'count') : 0,
      blobs: blobs ? int(blobs, 'count') : 0,
      bytes: blobs ? int(blobs, 'bytes') : 0,
    };
  }

  async releaseAll(owner: string): Promise<void> {
    await releaseOwner(this.driver, 'evidence', owner, 'write');
  }

  private rows(
    sql: string,
    params: readonly unknown[] = [],
    mode: 'single' | 'write' = 'single',
  ): Promise<Row[]> {
    return this.driver.run(mode, query(sql, params));
  }
}
