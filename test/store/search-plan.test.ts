/**
 * The main searches run on an index, on SQLite and on PostgreSQL: the statements the store
 * issues for `patient=`, `request.identifier=`, a `_lastUpdated` range and a `created` range (and,
 * on SQLite, the counts by state and outcome) are explained by the database itself (SQLite: EXPLAIN QUERY PLAN; PostgreSQL: EXPLAIN, after
 * ANALYZE on enough rows that the planner prefers an index to a scan).
 */
import { randomUUID } from 'node:crypto';
import type { CoverageEligibilityRequest, CoverageEligibilityResponse } from 'fhir/r4.js';
import { afterAll, describe, expect, it } from 'vitest';
import type { NewCheck, SearchFilters } from '../../src/checks/store/check-store.js';
import type { Result, SqlDriver, Statement, Work } from '../../src/checks/store/driver.js';
import { reuseKeyOf } from '../../src/checks/store/rows.js';
import { postgresBackend, sqliteBackend } from '../support/store-backends.js';
import { upstreamTaskRequest } from '../support/requests.js';

const T0 = Date.UTC(2026, 0, 1);
const TENANTS = 10;
const ROWS = 4000;

function newCheck(n: number): NewCheck {
  const id = randomUUID();
  const now = T0 + n * 60_000;
  const request: CoverageEligibilityRequest = {
    resourceType: 'CoverageEligibilityRequest',
    id,
    status: 'active',
    purpose: ['benefits'],
    patient: { reference: 'Patient/p1' },
    created: '2026-01-01',
    insurer: { identifier: { system: 'urn:payer', value: 'DAMAN' } },
  };
  const cer: CoverageEligibilityResponse = {
    resourceType: 'CoverageEligibilityResponse',
    id,
    status: 'active',
    purpose: ['benefits'],
    patient: { reference: 'Patient/p1' },
    created: new Date(now).toISOString(),
    request: { reference: `CoverageEligibilityRequest/${id}` },
    outcome: 'complete',
    insurer: { identifier: { system: 'urn:payer', value: 'DAMAN' } },
  };
  return {
    id,
    tenantId: `tenant-${n % TENANTS}`,
    idempotencyKey: `urn:visit|visit-${n}`,
    payerCode: 'DAMAN',
    isSearchAll: false,
    patientKey: `urn:eid|784-${n}`,
    request,
    upstreamRequest: upstreamTaskRequest('784-1990-1234567-6', now),
    state: 'done',
    upstreamTaskId: null,
    upstreamStatus: null,
    tasksCreated: 1,
    pollFailures: 0,
    nextRunAt: now,
    deadlineAt: now,
    envelope: null,
    cer,
    outcome: 'complete',
    answer: null,
    now,
  };
}

/** Records every statement a piece of work yields. */
function* recording<T>(work: Work<T>, seen: Statement[]): Work<T> {
  let step = work.next();
  while (!step.done) {
    seen.push(step.value);
    const result: Result = yield step.value;
    step = work.next(result);
  }
  return step.value;
}

function* single(statement: Statement): Work<Result> {
  return yield statement;
}

/** index: the index the plan uses, or any of them (`system|value` is on the key and the bare value). */
const searches: Array<{ name: string; filters: SearchFilters; index: string | string[] }> = [
  {
    name: 'patient=value',
    filters: { patient: [[{ value: '784-1234' }]] },
    index: 'checks_patient_value_idx',
  },
  {
    name: 'patient=system|value',
    filters: { patient: [[{ system: 'urn:eid', value: '784-1234' }]] },
    index: ['checks_patient_key_idx', 'checks_patient_value_idx'],
  },
  {
    name: 'request.identifier=value',
    filters: { requestIdentifier: [[{ value: 'visit-1234' }]] },
    index: 'checks_request_identifier_idx',
  },
  {
    name: 'request.identifier=system|value',
    filters: { requestIdentifier: [[{ system: 'urn:visit', value: 'visit-1234' }]] },
    index: ['checks_idempotency_idx', 'checks_request_identifier_idx'],
  },
  {
    name: '_lastUpdated range',
    filters: { lastUpdated: [{ from: T0 + 1000 * 60_000 }, { before: T0 + 1030 * 60_000 }] },
    index: 'checks_updated_idx',
  },
  {
    name: 'created range',
    filters: { created: [{ from: T0 + 1000 * 60_000, before: T0 + 1030 * 60_000 }] },
    index: 'checks_created_idx',
  },
];

/**
 * The plans of the statements `call` makes through the store's driver, as the database explains
 * them (one text per statement).
 */
async function plansOf<T>(
  driver: SqlDriver,
  kind: string,
  call: () => Promise<T>,
): Promise<{ result: T; plans: Array<{ sql: string; plan: string }> }> {
  const seen: Statement[] = [];
  const run = driver.run.bind(driver);
  driver.run = (mode, work) => run(mode, recording(work, seen));
  let result: T;
  try {
    result = await call();
  } finally {
    driver.run = run;
  }
  expect(seen.length).toBeGreaterThan(0);
  const explain = kind === 'sqlite' ? 'EXPLAIN QUERY PLAN ' : 'EXPLAIN ';
  const plans: Array<{ sql: string; plan: string }> = [];
  for (const statement of seen) {
    const { rows } = await driver.run(
      'single',
      single({ sql: explain + statement.sql, params: statement.params }),
    );
    plans.push({
      sql: statement.sql,
      plan: rows.map((row) => String(row.detail ?? row['QUERY PLAN'])).join('\n'),
    });
  }
  return { result, plans };
}

describe.each([sqliteBackend(), postgresBackend()])('search plans on $name', (backend) => {
  afterAll(() => backend.teardown());

  it('use an index for patient, request.identifier, _lastUpdated, created and the reuse lookup', async () => {
    await backend.setup();
    const store = await backend.open(backend.create());
    try {
      await store.migrate();
      for (let start = 0; start < ROWS; start += 500) {
        await Promise.all(Array.from({ length: 500 }, (_, i) => store.insert(newCheck(start + i))));
      }
      const driver = (store as unknown as { driver: SqlDriver }).driver;
      if (backend.name === 'postgres')
        await driver.run('single', single({ sql: 'ANALYZE checks', params: [] }));
      for (const search of searches) {
        const { result, plans } = await plansOf(driver, backend.name, () =>
          store.search('tenant-4', search.filters, { count: 20, offset: 0 }),
        );
        expect(result.checks.length, search.name).toBeGreaterThan(0);
        const wanted = typeof search.index === 'string' ? [search.index] : search.index;
        for (const { sql, plan } of plans) {
          expect(
            wanted.some((index) => plan.includes(index)),
            `${search.name}: ${sql}: ${plan}`,
          ).toBe(true);
        }
      }
      // The reuse lookup of $submit (docs/batch-and-reuse.md) runs on checks_reuse_idx.
      const reuse = await plansOf(driver, backend.name, () =>
        store.findReusable('tenant-4', reuseKeyOf(newCheck(1234))!, T0),
      );
      expect(reuse.result?.patientKey).toBe('urn:eid|784-1234');
      for (const { plan } of reuse.plans) expect(plan, `reuse: ${plan}`).toContain('checks_reuse_idx');
      // The counts by state and outcome (the `checks` gauge of /metrics) and the total of an
      // `outcome=` search read an index, never the rows: SQLite would follow each row's CER
      // overflow pages to reach its outcome (migration 13). PostgreSQL, which may scan a table
      // whose big values live out of line, is left to its own planner.
      if (backend.name === 'sqlite') {
        const counts = await plansOf(driver, backend.name, () => store.countByState());
        expect(counts.result.reduce((sum, row) => sum + row.count, 0)).toBe(ROWS);
        for (const { plan } of counts.plans)
          expect(plan, `countByState: ${plan}`).toContain('COVERING INDEX checks_outcome_idx');
        const byOutcome = await plansOf(driver, backend.name, () =>
          store.search('tenant-4', { outcome: [['complete']] }, { count: 0, offset: 0 }),
        );
        expect(byOutcome.result.total).toBe(ROWS / TENANTS);
        const count = byOutcome.plans.find(({ sql }) => sql.includes('COUNT(*)'));
        expect(count?.plan, `outcome count: ${count?.plan}`).toContain('COVERING INDEX checks_outcome_idx');
      }
    } finally {
      await store.close();
    }
  }, 60_000);
});
