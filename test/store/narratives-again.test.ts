/**
 * Migration 16 (issue 28): every stored CER's narrative rendered again by the current function,
 * from the CER and the categories its stored request asked, on SQLite and PostgreSQL. A changed
 * narrative is a new version; an unchanged one keeps its version (and its ETag).
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { CoverageEligibilityRequest, CoverageEligibilityResponse } from 'fhir/r4.js';
import Database from 'better-sqlite3';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { CheckStore, NewCheck } from '../../src/checks/store/check-store.js';
import { mapEnvelope } from '../../src/mapping/response/index.js';
import { envelopeSchema } from '../../src/upstream/contract.js';
import { expectValidFhir } from '../support/fhir.js';
import { testDatabaseUrl } from '../support/postgres.js';
import { postgresBackend, sqliteBackend, storesOn } from '../support/store-backends.js';
import { upstreamTaskRequest } from '../support/requests.js';

const T0 = Date.UTC(2026, 10, 22, 10, 0, 0);
const SERVICE = 'http://fhir-eligibility-adapter.org/fhir/CodeSystem/service-category';

/** Runs one statement on the database behind a store location (a SQLite file or a PostgreSQL schema). */
async function runSql(kind: string, location: string, sql: string): Promise<void> {
  if (kind === 'sqlite') {
    const db = new Database(location.slice('sqlite:'.length));
    try {
      db.exec(sql);
    } finally {
      db.close();
    }
    return;
  }
  const client = new pg.Client({ connectionString: testDatabaseUrl() });
  await client.connect();
  try {
    await client.query(`SET search_path TO "${location}"`);
    await client.query(sql);
  } finally {
    await client.end();
  }
}

function check(cer: CoverageEligibilityResponse, request: CoverageEligibilityRequest): NewCheck {
  return {
    id: cer.id!,
    tenantId: 'tenant-a',
    idempotencyKey: null,
    payerCode: 'DAMAN',
    isSearchAll: false,
    patientKey: 'urn:eid|784-1990-1234567-6',
    request,
    upstreamRequest: upstreamTaskRequest('784-1990-1234567-6', T0),
    state: 'done',
    upstreamTaskId: 'task-1',
    upstreamStatus: 'PROCESS_COMPLETE',
    tasksCreated: 1,
    pollFailures: 0,
    nextRunAt: T0,
    deadlineAt: T0 + 60_000,
    envelope: null,
    cer,
    outcome: cer.outcome,
    answer: { status: 200 },
    now: T0,
  };
}

function mapped(id: string, request: CoverageEligibilityRequest): CoverageEligibilityResponse {
  const envelope = envelopeSchema.parse(
    JSON.parse(readFileSync(new URL('../fixtures/upstream/found-eligible.json', import.meta.url), 'utf8')),
  );
  return mapEnvelope(envelope, {
    checkId: id,
    patient: { reference: 'Patient/p1' },
    insurer: { display: 'Daman' },
    request,
    isSearchAll: false,
    baseUrl: 'https://adapter.example.org',
    now: new Date(T0).toISOString(),
  });
}

describe.each([sqliteBackend(), postgresBackend()])('migration 16 on $name', (backend) => {
  const stores = storesOn(backend);

  it('renders every stored narrative again, a new version only where it changed', async () => {
    const location = backend.create();
    const store: CheckStore = await stores.open(location);
    const request = (id: string): CoverageEligibilityRequest => ({
      resourceType: 'CoverageEligibilityRequest',
      id,
      status: 'active',
      purpose: ['benefits'],
      patient: { reference: 'Patient/p1' },
      created: '2026-11-22',
      insurer: { display: 'Daman' },
      item: [{ category: { coding: [{ system: SERVICE, code: 'physiotherapy' }] } }],
    });
    // One stored with the narrative of the previous release, one already current.
    const oldId = randomUUID();
    const old = mapped(oldId, request(oldId));
    const oldText = '<div xmlns="http://www.w3.org/1999/xhtml"><p><b>Eligible</b></p><table></table></div>';
    await store.insert(check({ ...old, text: { status: 'generated', div: oldText } }, request(oldId)));
    const currentId = randomUUID();
    await store.insert(check(mapped(currentId, request(currentId)), request(currentId)));
    const before = await store.get('tenant-a', currentId);

    await runSql(backend.name, location, 'DELETE FROM schema_migrations WHERE version = 16');
    await store.migrate();

    const renewed = await store.get('tenant-a', oldId);
    expect(renewed?.version).toBe(2);
    expect(renewed?.cer.meta?.versionId).toBe('2');
    expect(renewed?.cer.text?.div).toBe(old.text?.div);
    expect(renewed?.cer.text?.div).toContain(
      '<div><h2>What to collect</h2><ul><li>Physiotherapy (Outpatient): AED 25 per visit</li></ul></div>',
    );
    expectValidFhir(renewed?.cer);
    const same = await store.get('tenant-a', currentId);
    expect(same?.version).toBe(before?.version);
    expect(same?.cer).toEqual(before?.cer);
  });
});
