/**
 * The evidence store (docs/evidence.md) on SQLite and PostgreSQL: the documents of a final answer
 * are written with its first final version, claimed with a lease by one claimer at a time, kept
 * once per SHA-256, read back as stored (through a restart), searched by patient, answer and date
 * (kept ones only, tenant-scoped); a document not kept rewrites the CER's narrative in the same
 * transaction; retention keeps a check with kept documents (and its CER) past RETENTION_DAYS and
 * removes it, documents and bytes, after EVIDENCE_RETENTION_DAYS.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { CoverageEligibilityResponse } from 'fhir/r4.js';
import { describe, expect, it } from 'vitest';
import type { CheckInput } from '../../src/mapping/types.js';
import { newCheckOf } from '../../src/checks/service.js';
import type { Check, EvidenceItem } from '../../src/checks/store/check-store.js';
import type { Store } from '../../src/checks/store/appointment-store.js';
import type { KeptBytes } from '../../src/checks/store/evidence-store.js';
import { postgresBackend, sqliteBackend, storesOn } from '../support/store-backends.js';
import type { Backend } from '../support/store-backends.js';
import { checkInput } from '../support/requests.js';

const T0 = Date.UTC(2026, 10, 28, 6, 0);
const DAY = 86_400_000;
const LEASE = 30_000;
const EID = '784-1990-1234567-6';

const input = (eid = EID): CheckInput => checkInput({ startedAt: T0, emiratesId: eid });

function bytesOf(text: string): KeptBytes {
  const bytes = Buffer.from(text);
  return {
    bytes,
    sha256: createHash('sha256').update(bytes).digest('hex'),
    sha1: createHash('sha1').update(bytes).digest('base64'),
    contentType: 'application/pdf',
  };
}

/** A check finished at `at` with these documents (their ids made from the check's id). */
async function finished(
  store: Store,
  at: number,
  kinds: readonly string[] = ['s', 'd0'],
  tenantId = 'tenant-a',
  eid = EID,
): Promise<{ check: Check; items: EvidenceItem[] }> {
  const id = randomUUID();
  const { check } = await store.insert(
    newCheckOf(input(eid), { id, tenantId, now: at, timeoutMs: 60_000, baseUrl: 'http://localhost' }),
  );
  const owner = `claimer:${id}`;
  await store.claimDue({ owner, now: at, leaseMs: LEASE, limit: 100, maxInFlight: () => 100 });
  const items = kinds.map((kind) => ({
    id: `${id}.${kind}`,
    label: kind === 's' ? 'Payer portal screenshot' : 'Referral form',
    filename: kind === 's' ? null : 'referral-form.pdf',
    contentType: kind === 's' ? 'image/png' : 'application/pdf',
  }));
  const cer: CoverageEligibilityResponse = { ...check.cer, outcome: 'complete' };
  const done = await store.update(id, owner, { state: 'done', outcome: 'complete', cer }, at, check, {
    release: true,
    final: true,
    evidence: { items, dueAt: at },
  });
  expect(done).not.toBeNull();
  return { check: done!, items };
}

function suite(backend: Backend): void {
  const stores = storesOn(backend);
  const open = () => stores.open(backend.create());

  it('schedules the documents with the final answer; one claimer at a time holds each', async () => {
    const store = await open();
    const { items } = await finished(store, T0);
    const first = await store.evidence.claimDue({ owner: 'a:1', now: T0, leaseMs: LEASE, limit: 10 });
    expect(first.map((e) => e.id).sort()).toEqual(items.map((i) => i.id).sort());
    expect(first.every((e) => e.state === 'pending' && e.attempts === 0)).toBe(true);
    expect(await store.evidence.claimDue({ owner: 'b:1', now: T0 + 1, leaseMs: LEASE, limit: 10 })).toEqual(
      [],
    );
    // A retry is due later; a lease run out is claimed again.
    expect(await store.evidence.retry(first[0]!.id, 'a:1', T0 + 5_000, T0)).toBe(true);
    expect(await store.evidence.retry(first[0]!.id, 'a:1', T0 + 5_000, T0)).toBe(false);
    const again = await store.evidence.claimDue({
      owner: 'b:2',
      now: T0 + LEASE + 1,
      leaseMs: LEASE,
      limit: 10,
    });
    expect(again.map((e) => e.id).sort()).toEqual(items.map((i) => i.id).sort());
    expect(again.find((e) => e.id === first[0]!.id)?.attempts).toBe(1);
  });

  it('keeps the bytes once per SHA-256, reads them back as stored (also after a restart), tenant-scoped', async () => {
    const location = backend.create();
    // Opened outside storesOn, so that closing it (the restart) is this test's own.
    let store = await backend.open(location);
    await store.migrate();
    const a = await finished(store, T0);
    const b = await finished(store, T0);
    const claimed = await store.evidence.claimDue({ owner: 'w:1', now: T0, leaseMs: LEASE, limit: 10 });
    expect(claimed).toHaveLength(4);
    const letter = bytesOf('%PDF-1.4 the same letter');
    for (const row of claimed) {
      const kept = row.id.endsWith('.s') ? bytesOf(`screenshot ${row.checkId}`) : letter;
      expect(await store.evidence.keep(row.id, 'w:1', kept, T0 + 100)).toBe(true);
    }
    expect(await store.evidence.usage()).toEqual({
      kept: 4,
      blobs: 3,
      bytes: letter.bytes.length + 2 * Buffer.byteLength(`screenshot ${a.check.id}`),
    });
    await store.close();
    store = await stores.open(location);
    const read = await store.evidence.read('tenant-a', `${b.check.id}.d0`);
    expect(read?.bytes.equals(letter.bytes)).toBe(true);
    expect(read?.evidence).toMatchObject({
      state: 'kept',
      sha1: letter.sha1,
      size: letter.bytes.length,
      keptAt: T0 + 100,
    });
    expect(await store.evidence.read('tenant-b', `${b.check.id}.d0`)).toBeNull();
    expect(await store.evidence.get('tenant-b', `${b.check.id}.d0`)).toBeNull();
  });

  it('a document not kept: failed with its reason, the CER rewritten in the same transaction', async () => {
    const store = await open();
    const { check } = await finished(store, T0, ['d0']);
    const [row] = await store.evidence.claimDue({ owner: 'w:1', now: T0, leaseMs: LEASE, limit: 10 });
    const noted: CoverageEligibilityResponse = { ...check.cer, disposition: 'noted' };
    // A CER that moved on meanwhile: nothing is written, the row is decided again later.
    await expect(
      store.evidence.fail(row!.id, 'w:1', 'too-big', T0 + 1, { version: check.version - 1, cer: noted }),
    ).rejects.toThrow(/moved on/);
    expect((await store.evidence.get('tenant-a', row!.id))?.state).toBe('pending');
    expect(
      await store.evidence.fail(row!.id, 'w:1', 'too-big', T0 + 1, { version: check.version, cer: noted }),
    ).toBe(true);
    expect(await store.evidence.get('tenant-a', row!.id)).toMatchObject({
      state: 'failed',
      reason: 'too-big',
    });
    const stored = await store.get('tenant-a', check.id);
    expect(stored?.version).toBe(check.version + 1);
    expect(stored?.cer.disposition).toBe('noted');
    expect(stored?.cer.meta?.versionId).toBe(String(check.version + 1));
    expect(await store.evidence.read('tenant-a', row!.id)).toBeNull();
  });

  it('a document not kept yet, then kept: each CER note in the same transaction as its row', async () => {
    const store = await open();
    const { check } = await finished(store, T0, ['d0']);
    const [row] = await store.evidence.claimDue({ owner: 'w:1', now: T0, leaseMs: LEASE, limit: 10 });
    const yet: CoverageEligibilityResponse = { ...check.cer, disposition: 'not kept yet' };
    // A CER that moved on meanwhile: no retry is written either, the row is decided again later.
    await expect(
      store.evidence.retry(row!.id, 'w:1', T0 + 60_000, T0 + 1, { version: check.version - 1, cer: yet }),
    ).rejects.toThrow(/moved on/);
    expect((await store.evidence.get('tenant-a', row!.id))?.attempts).toBe(0);
    expect(
      await store.evidence.retry(row!.id, 'w:1', T0 + 60_000, T0 + 1, { version: check.version, cer: yet }),
    ).toBe(true);
    expect(await store.evidence.get('tenant-a', row!.id)).toMatchObject({
      state: 'pending',
      attempts: 1,
      nextRunAt: T0 + 60_000,
    });
    const noted = await store.get('tenant-a', check.id);
    expect(noted).toMatchObject({ version: check.version + 1, cer: { disposition: 'not kept yet' } });
    const [again] = await store.evidence.claimDue({
      owner: 'w:2',
      now: T0 + 60_000,
      leaseMs: LEASE,
      limit: 10,
    });
    const back: CoverageEligibilityResponse = { ...check.cer, disposition: 'kept after all' };
    expect(
      await store.evidence.keep(again!.id, 'w:2', bytesOf('letter'), T0 + 60_001, {
        version: noted!.version,
        cer: back,
      }),
    ).toBe(true);
    const kept = await store.get('tenant-a', check.id);
    expect(kept).toMatchObject({ version: check.version + 2, cer: { disposition: 'kept after all' } });
    expect(kept?.cer.meta?.versionId).toBe(String(check.version + 2));
    expect((await store.evidence.get('tenant-a', row!.id))?.state).toBe('kept');
  });

  it('searches kept documents by patient, answer and date, newest first, one tenant only', async () => {
    const store = await open();
    const early = await finished(store, T0);
    const late = await finished(store, T0 + DAY);
    const other = await finished(store, T0, ['s'], 'tenant-a', '784-1985-7654321-3');
    const elsewhere = await finished(store, T0, ['s'], 'tenant-b');
    const rows = await store.evidence.claimDue({ owner: 'w:1', now: T0 + DAY, leaseMs: LEASE, limit: 20 });
    for (const row of rows) {
      if (row.id === `${early.check.id}.d0`) continue; // stays pending: never listed
      const at = row.checkId === late.check.id ? T0 + DAY : T0 + 10;
      await store.evidence.keep(row.id, 'w:1', bytesOf(row.id), at);
    }
    const ids = async (filters: Parameters<Store['evidence']['search']>[1]) =>
      (await store.evidence.search('tenant-a', filters, 10, 0)).map((e) => e.id);
    // Newest kept first, then by id.
    expect(await ids({ patient: [{ system: 'urn:eid', value: EID }] })).toEqual([
      `${late.check.id}.d0`,
      `${late.check.id}.s`,
      `${early.check.id}.s`,
    ]);
    expect(await ids({ patient: [{ value: '784-1985-7654321-3' }] })).toEqual([`${other.check.id}.s`]);
    expect(await ids({ patient: [{ system: 'urn:other', value: EID }] })).toEqual([]);
    expect(await ids({ checkIds: [early.check.id] })).toEqual([`${early.check.id}.s`]);
    expect((await ids({ keptAt: [{ from: T0 + DAY }] })).sort()).toEqual([
      `${late.check.id}.d0`,
      `${late.check.id}.s`,
    ]);
    expect(await ids({ checkIds: [elsewhere.check.id] })).toEqual([]);
    expect(await store.evidence.search('tenant-b', {}, 10, 0)).toHaveLength(1);
    expect(await store.evidence.search('tenant-a', {}, 2, 2)).toHaveLength(2);
  });

  it('retention: a check with kept documents outlives RETENTION_DAYS, then goes with its bytes', async () => {
    const store = await open();
    const proof = await finished(store, T0, ['s']);
    const plain = await finished(store, T0, []);
    const notKept = await finished(store, T0, ['d0']);
    const [a, b] = await store.evidence.claimDue({ owner: 'w:1', now: T0, leaseMs: LEASE, limit: 10 });
    for (const row of [a!, b!]) {
      if (row.checkId === proof.check.id) await store.evidence.keep(row.id, 'w:1', bytesOf('proof'), T0);
      else await store.evidence.fail(row.id, 'w:1', 'expired', T0);
    }
    // RETENTION_DAYS (30) passed, EVIDENCE_RETENTION_DAYS (730) not.
    const at = T0 + 31 * DAY;
    expect(await store.purgeBefore(at - 30 * DAY, at - 730 * DAY)).toBe(2);
    expect(await store.get('tenant-a', plain.check.id)).toBeNull();
    expect(await store.get('tenant-a', notKept.check.id)).toBeNull();
    expect(await store.evidence.ofCheck('tenant-a', notKept.check.id)).toEqual([]);
    const kept = await store.get('tenant-a', proof.check.id);
    expect(kept?.cer.outcome).toBe('complete');
    expect(kept?.envelope).toBeNull();
    expect((await store.evidence.read('tenant-a', `${proof.check.id}.s`))?.bytes.toString()).toBe('proof');
    // EVIDENCE_RETENTION_DAYS passed: the check, its document and the bytes go.
    const later = T0 + 731 * DAY;
    expect(await store.purgeBefore(later - 30 * DAY, later - 730 * DAY)).toBe(1);
    expect(await store.get('tenant-a', proof.check.id)).toBeNull();
    expect(await store.evidence.usage()).toEqual({ kept: 0, blobs: 0, bytes: 0 });
  });
}

describe('evidence store: SQLite', () => suite(sqliteBackend()));
describe('evidence store: PostgreSQL', () => suite(postgresBackend()));
