/**
 * Issue 42: a round of reading the EHR's schedule (docs/ehr-schedule.md) over APPOINTMENTS
 * appointments, and a round that finds nothing new, against an EHR in this process (Medplum's FHIR
 * router over its in-memory repository, test/support/fhir-ehr.ts: pages of at most 100) and the
 * sandbox, with the service as its own process (`src/main.ts`, SQLite), so its CPU is its own.
 *
 * The EHR starts empty (the service's first round, at start-up, reads nothing); then APPOINTMENTS
 * appointments of APPOINTMENTS patients (one active DAMAN Coverage each) are created from 3 hours
 * ahead on, one a minute, and two rounds are started (`POST /app/api/ehr-schedule/rounds`):
 *
 * - the first books every appointment: its time (the round's own log line), the requests the EHR
 *   got, the service's CPU over the round (/proc);
 * - the second finds nothing new: the same, and the store's rows (appointments, checks, the
 *   schedule's entries) before and after it, which must not change.
 *
 * The sandbox runs at scale 1 (portal sessions of 25-70 s): the checks the first round books wait
 * for the clinic's slots or poll every 5 s, so the round's CPU is the round's.
 *
 *   npx tsx bench/ehr-schedule.ts        (BENCH_APPOINTMENTS=1000)
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { hashApiKey } from '../src/config.js';
import { startSandbox } from '../src/sandbox/index.js';
import { emiratesId } from '../test/support/emirates-id.js';
import { clientKeyPair, startFhirEhr } from '../test/support/fhir-ehr.js';
import { cpuSeconds, machine, record, spawnService, until } from './lib.js';

const APPOINTMENTS = Number(process.env.BENCH_APPOINTMENTS ?? 1000);
const UPSTREAM_KEY = 'bench-upstream-key-0123456789';
const KEY = 'bench-ehr-schedule-key-0123456789';
const AUTH = { Authorization: `Bearer ${KEY}` };
const V2_0203 = 'http://terminology.hl7.org/CodeSystem/v2-0203';

interface Round {
  at: string;
  outcome: string;
  read: number;
  booked: number;
  notChecked: number;
  requests: number;
}

async function lastRound(url: string): Promise<Round | null> {
  const res = await fetch(`${url}/app/api/operator`, { headers: AUTH });
  const body = (await res.json()) as { ehrSchedule: { last: Round | null } | null };
  return body.ehrSchedule?.last ?? null;
}

/** The round's own time from its log line (`EHR schedule read`, `ms`). */
function loggedMs(output: readonly string[], nth: number): number | undefined {
  const lines = output.filter((l) => l.includes('"EHR schedule read"'));
  const line = lines[nth];
  return line ? (JSON.parse(line) as { ms: number }).ms : undefined;
}

/** The store's rows a round could write, counted and dated. */
function storeRows(db: string): Record<string, number> {
  const sqlite = new Database(db, { readonly: true });
  try {
    const one = (sql: string) => Number(Object.values(sqlite.prepare(sql).get() as object)[0] ?? 0);
    return {
      appointments: one('SELECT count(*) FROM appointments'),
      appointmentsUpdated: one('SELECT COALESCE(max(updated_at), 0) FROM appointments'),
      checks: one('SELECT count(*) FROM checks'),
      entries: one('SELECT count(*) FROM ehr_schedule_entries'),
      entriesUpdated: one('SELECT COALESCE(max(updated_at), 0) FROM ehr_schedule_entries'),
    };
  } finally {
    sqlite.close();
  }
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-ehr-schedule-'));
  const keys = await clientKeyPair();
  const ehr = await startFhirEhr({ clientId: 'adapter', publicJwks: { keys: [keys.publicJwk] } });
  const sandbox = await startSandbox({ port: 0, timeScale: 1, apiKeys: [UPSTREAM_KEY] });
  const tenants = join(dir, 'tenants.json');
  writeFileSync(
    tenants,
    JSON.stringify({
      tenants: [
        {
          id: 't0',
          apiKeys: [`sha256:${hashApiKey(KEY)}`],
          upstream: { apiKey: UPSTREAM_KEY, clinicId: 'clinic-t0', clientId: 'EHR-1' },
          practiceId: 'P-t0',
          maxInFlight: 5,
          ehrSchedule: {
            fhirBaseUrl: ehr.fhirBase,
            clientId: 'adapter',
            clientKeys: { keys: [keys.privateJwk] },
            everyMinutes: 1440,
          },
        },
      ],
    }),
  );
  const db = join(dir, 'adapter.db');
  const service = await spawnService({
    UPSTREAM_BASE_URL: sandbox.url,
    TENANTS_FILE: tenants,
    DATABASE_URL: `sqlite:${db}`,
  });
  try {
    await until(() => lastRound(service.url).then((r) => r ?? undefined), 30_000, 'the first round');
    const start = Date.now() + 3 * 3_600_000;
    for (let i = 0; i < APPOINTMENTS; i += 1) {
      const patient = await ehr.create({
        resourceType: 'Patient',
        identifier: [
          { type: { coding: [{ system: V2_0203, code: 'NI' }] }, value: emiratesId(1980, 5_000_000 + i) },
        ],
        name: [{ given: [`Patient${i}`], family: 'Bench' }],
      });
      await ehr.create({
        resourceType: 'Coverage',
        status: 'active',
        beneficiary: { reference: `Patient/${patient.id}` },
        payor: [{ identifier: { type: { coding: [{ system: V2_0203, code: 'NIIP' }] }, value: 'DAMAN' } }],
      });
      await ehr.create({
        resourceType: 'Appointment',
        status: 'booked',
        start: new Date(start + i * 60_000).toISOString(),
        participant: [{ actor: { reference: `Patient/${patient.id}` }, status: 'accepted' }],
      });
    }
    const rounds: Record<string, unknown>[] = [];
    for (const [nth, name] of [
      [1, 'books every appointment'],
      [2, 'finds nothing new'],
    ] as const) {
      const before = await lastRound(service.url);
      const rowsBefore = storeRows(db);
      const requestsBefore = ehr.requests.length;
      const busyBefore = ehr.busyMs;
      const cpuBefore = cpuSeconds(service.child.pid!);
      const started = Date.now();
      const res = await fetch(`${service.url}/app/api/ehr-schedule/rounds`, {
        method: 'POST',
        headers: AUTH,
      });
      if (res.status !== 202) throw new Error(`read now: ${res.status}`);
      const round = await until(
        () => lastRound(service.url).then((r) => (r && r.at !== before?.at ? r : undefined)),
        600_000,
        name,
      );
      const wallMs = Date.now() - started;
      const cpu = cpuSeconds(service.child.pid!) - cpuBefore;
      const rowsAfter = storeRows(db);
      rounds.push({
        round: name,
        outcome: round.outcome,
        appointments: round.read,
        booked: round.booked,
        notChecked: round.notChecked,
        roundMs: loggedMs(service.output, nth),
        wallMs,
        ehrRequests: ehr.requests.length - requestsBefore,
        /** The EHR's own time answering them (this process: Medplum's in-memory search scans). */
        ehrBusyMs: Math.round(ehr.busyMs - busyBefore),
        ehrRequestsByKind: {
          appointmentPages: ehr.requests
            .slice(requestsBefore)
            .filter((r) => r.startsWith('/fhir/Appointment?')).length,
          coverageSearches: ehr.requests.slice(requestsBefore).filter((r) => r.startsWith('/fhir/Coverage?'))
            .length,
          token: ehr.requests.slice(requestsBefore).filter((r) => r.startsWith('/auth/token')).length,
        },
        serviceCpuSeconds: Number(cpu.toFixed(3)),
        cpuMsPerAppointment: Number(((cpu * 1000) / Math.max(1, round.read)).toFixed(3)),
        rowsBefore,
        rowsAfter,
      });
    }
    const result = { appointments: APPOINTMENTS, machine: machine(), rounds };
    await record('ehr-schedule', result);
  } finally {
    await service.stop();
    await ehr.close();
    await sandbox.close();
  }
}

await main();
