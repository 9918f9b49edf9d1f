/**
 * The schedule read from the EHR's FHIR API (docs/ehr-schedule.md), over real HTTP: the adapter as
 * a SMART Backend Services client of an EHR the test starts (Medplum's FHIR router and in-memory
 * repository behind a small server, test/support/fhir-ehr.ts, with a token endpoint that verifies
 * the client assertion), against the sandbox upstream. The service's clock and the EHR's are the
 * test's (real time plus an offset it moves); every appointment is built relative to it.
 */
import type { Appointment, Coverage, CoverageEligibilityRequest, Patient } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EhrSchedule } from '../../src/config.js';
import { localDay } from '../../src/checks/previsit.js';
import { EHR_APPOINTMENT_SYSTEM } from '../../src/mapping/request/check-input.js';
import { expectValidFhir } from '../support/fhir.js';
import { emiratesId } from '../support/emirates-id.js';
import type { FhirEhr } from '../support/fhir-ehr.js';
import { clientKeyPair, startFhirEhr } from '../support/fhir-ehr.js';
import type { Harness } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import type { Receiver } from '../support/receiver.js';
import { startReceiver } from '../support/receiver.js';
import { until } from '../support/until.js';

const HOUR = 3_600_000;
const V2_0203 = 'http://terminology.hl7.org/CodeSystem/v2-0203';
const TENANT = 'clinic-a';
const TOKEN_SECONDS = 600;

let offset = 0;
const now = () => Date.now() + offset;
let ehr: FhirEhr;
let elsewhere: Receiver;
let h: Harness;
let settings: EhrSchedule;
/** What the log must never hold: every identifier, name and birth date the EHR served. */
const secrets: string[] = [];

beforeAll(async () => {
  const keys = await clientKeyPair();
  elsewhere = await startReceiver();
  ehr = await startFhirEhr({
    clientId: 'adapter-clinic-a',
    publicJwks: { keys: [keys.publicJwk] },
    tokenSeconds: TOKEN_SECONDS,
    now,
    elsewhere: `${elsewhere.url}/fhir`,
    maxPageSize: 2,
  });
  settings = {
    fhirBaseUrl: ehr.fhirBase,
    clientId: 'adapter-clinic-a',
    clientKeys: { keys: [keys.privateJwk] },
    scope: 'system/Appointment.rs system/Patient.rs system/Coverage.rs',
    everyMinutes: 15,
    daysAhead: 2,
    search: [],
  };
  h = await startHarness({ ehrSchedule: { a: settings }, overrides: { now } });
  // The round at start-up, on an empty schedule.
  await until(async () => (await h.server.ehrSchedule.lastRound(TENANT))?.lastAt ?? undefined);
}, 60_000);
afterAll(async () => {
  await h.stop();
  await ehr.close();
  await elsewhere.close();
});

/** Starts a round now and waits for it to finish; its record. */
async function round() {
  const before = (await h.server.ehrSchedule.lastRound(TENANT))?.lastAt ?? -1;
  await h.server.ehrSchedule.readNow(TENANT);
  return until(
    async () => {
      const r = await h.server.ehrSchedule.lastRound(TENANT);
      return r && r.lastAt !== null && r.lastAt > before ? r : undefined;
    },
    20_000,
    'a round',
  );
}

let serial = 0;
async function patient(
  options: { emiratesId?: string | null; name?: string } = {},
): Promise<Patient & { id: string }> {
  serial += 1;
  const id = options.emiratesId === undefined ? emiratesId(1988, 4_100_000 + serial) : options.emiratesId;
  const given = options.name ?? `Layla${serial}`;
  const birthDate = `1988-03-${String(10 + (serial % 18)).padStart(2, '0')}`;
  if (id) secrets.push(id);
  secrets.push(given, birthDate);
  return ehr.create<Patient>({
    resourceType: 'Patient',
    ...(id
      ? {
          identifier: [
            {
              type: { coding: [{ system: V2_0203, code: 'NI' }] },
              system: 'http://ica.gov.ae/emirates-id',
              value: id,
            },
          ],
        }
      : {}),
    name: [{ given: [given], family: 'Haddad' }],
    birthDate,
  });
}

async function coverage(
  patientId: string,
  payer: string | { display: string } | { reference: string },
  options: { subscriberId?: string; status?: Coverage['status'] } = {},
): Promise<Coverage> {
  if (options.subscriberId) secrets.push(options.subscriberId);
  return ehr.create<Coverage>({
    resourceType: 'Coverage',
    status: options.status ?? 'active',
    ...(options.subscriberId ? { subscriberId: options.subscriberId } : {}),
    beneficiary: { reference: `Patient/${patientId}` },
    payor: [
      typeof payer === 'string'
        ? { identifier: { type: { coding: [{ system: V2_0203, code: 'NIIP' }] }, value: payer } }
        : payer,
    ],
  });
}

let minutes = 0;
async function appointment(patientId: string, start = now() + 3 * HOUR + (minutes += 1) * 60_000) {
  return ehr.create<Appointment>({
    resourceType: 'Appointment',
    status: 'booked',
    start: new Date(start).toISOString(),
    end: new Date(start + 15 * 60_000).toISOString(),
    participant: [{ actor: { reference: `Patient/${patientId}` }, status: 'accepted' }],
  });
}

const keyOf = (id: string, payer?: string) =>
  `${EHR_APPOINTMENT_SYSTEM}|${ehr.fhirBase}/Appointment/${id}${payer ? `/${payer}` : ''}`;
const booked = (id: string, payer?: string) =>
  h.server.store.appointments.findByKey(TENANT, keyOf(id, payer));

async function pageRows(startAt: number) {
  const res = await request(h.url)
    .get(`/app/api/appointments?day=${localDay(startAt, 'Asia/Dubai')}`)
    .set(h.auth);
  expect(res.status).toBe(200);
  return res.body as {
    rows: { id: string; state: string; source: string; answer: string | null; name: string }[];
  };
}

describe('reading the schedule from the EHR', () => {
  it('books every appointment of every page once, and a repeat round books nothing', async () => {
    const made: (Appointment & { id: string })[] = [];
    for (let i = 0; i < 5; i += 1) {
      const p = await patient();
      await coverage(p.id, 'DAMAN');
      made.push(await appointment(p.id));
    }
    const first = await round();
    expect(first.lastOutcome).toBe('ok');
    expect(first.lastCounts).toMatchObject({ booked: 5, notChecked: 0 });
    const pages = ehr.requests.filter((r) => r.startsWith('/fhir/Appointment?'));
    expect(pages.some((r) => r.includes('_offset=4'))).toBe(true);
    for (const a of made) {
      const stored = await booked(a.id);
      expect(stored?.startAt).toBe(Date.parse(a.start!));
      const read = await request(h.url).get(`/fhir/CoverageEligibilityRequest/${stored?.id}`).set(h.auth);
      expect(read.status).toBe(200);
      expectValidFhir(read.body);
      expect((read.body as CoverageEligibilityRequest).identifier?.[0]).toEqual({
        system: EHR_APPOINTMENT_SYSTEM,
        value: `${ehr.fhirBase}/Appointment/${a.id}`,
      });
    }
    // Each booking check is background work (the desk first, docs/queue.md), due at the start.
    for (const a of made) {
      const check = await h.server.store.get(TENANT, (await booked(a.id))!.bookingCheckId);
      expect(check).toMatchObject({ queueClass: 'background', queueDeadlineAt: Date.parse(a.start!) });
    }
    const rows = await pageRows(Date.parse(made[0]!.start!));
    const firstId = (await booked(made[0]!.id))?.id;
    expect(rows.rows.find((r) => r.id === firstId)?.source).toBe('EHR schedule');

    const requestsBefore = ehr.requests.length;
    const again = await round();
    expect(again.lastCounts).toMatchObject({ booked: 0, moved: 0, cancelled: 0, notChecked: 0 });
    // Unchanged appointments are not read again: the search pages only.
    expect(ehr.requests.slice(requestsBefore).every((r) => r.startsWith('/fhir/Appointment?'))).toBe(true);
  });

  it('an appointment that has started is checked at once as any request, still background work due at its start', async () => {
    const p = await patient();
    await coverage(p.id, 'DAMAN');
    // A minute ago (today, so the round's search finds it): no booking, a check for now.
    const made = await appointment(p.id, now() - 60_000);
    const before = (await h.server.store.search(TENANT, {}, { count: 1000, offset: 0, total: false })).checks;
    await round();
    const after = (await h.server.store.search(TENANT, {}, { count: 1000, offset: 0, total: false })).checks;
    const fresh = after.filter((c) => !before.some((b) => b.id === c.id));
    expect(fresh).toHaveLength(1);
    expect(fresh[0]).toMatchObject({ queueClass: 'background', queueDeadlineAt: Date.parse(made.start!) });
  });

  it('books one check per payer of the active Coverages, and one from a card number alone', async () => {
    const two = await patient();
    await coverage(two.id, 'DAMAN');
    // The second payer as an Organization the Coverage refers to: it comes with the search (_include).
    const thiqa = await ehr.create({
      resourceType: 'Organization',
      name: 'Thiqa',
      identifier: [{ type: { coding: [{ system: V2_0203, code: 'NIIP' }] }, value: 'THIQA' }],
    });
    await coverage(two.id, { reference: `Organization/${thiqa.id}` });
    await coverage(two.id, 'NAS', { status: 'cancelled' });
    const both = await appointment(two.id);
    const card = await patient({ emiratesId: null });
    await coverage(card.id, 'DAMAN', { subscriberId: 'DAM-771-0042' });
    const byCard = await appointment(card.id);
    const r = await round();
    expect(r.lastCounts).toMatchObject({ booked: 2, notChecked: 0 });
    expect((await booked(both.id, 'DAMAN'))?.input.payerCode).toBe('DAMAN');
    expect((await booked(both.id, 'THIQA'))?.input.payerCode).toBe('THIQA');
    expect(await booked(both.id, 'NAS')).toBeNull();
    expect(ehr.requests.filter((r) => r.startsWith(`/fhir/Organization/`))).toEqual([]);
    const cardBooking = await booked(byCard.id);
    expect(cardBooking?.input.upstream.id_type).not.toBe('EMIRATES_ID');
    expect(cardBooking?.input.patientKey).toContain('DAM-771-0042');
  });

  it('lists an appointment it cannot check as Not checked, with the reason, and counts it', async () => {
    const noId = await patient({ emiratesId: null });
    await coverage(noId.id, 'DAMAN');
    const good = emiratesId(1990, 4_200_001);
    const wrongDigit = `${good.slice(0, -1)}${(Number(good.slice(-1)) + 1) % 10}`;
    const typo = await patient({ emiratesId: wrongDigit });
    await coverage(typo.id, 'DAMAN');
    const uninsured = await patient();
    const nameless = await patient();
    await coverage(nameless.id, { display: 'Some insurer' });
    const made = [
      [await appointment(noId.id), 'Not checked: no Emirates ID or card number'],
      [await appointment(typo.id), 'Not checked: the Emirates ID fails its check digit'],
      [await appointment(uninsured.id), 'Not checked: no active Coverage'],
      [await appointment(nameless.id), 'Not checked: the payer cannot be named'],
    ] as const;
    const r = await round();
    expect(r.lastCounts).toMatchObject({ booked: 0, notChecked: 4 });
    for (const [a, state] of made) {
      expect(await booked(a.id)).toBeNull();
      const rows = await pageRows(Date.parse(a.start!));
      const row = rows.rows.find((x) => x.id === `${ehr.fhirBase}/Appointment/${a.id}`);
      expect(row).toMatchObject({ state, source: 'EHR schedule', answer: null });
    }
    const metrics = await request(h.url).get('/metrics');
    expect(metrics.text).toMatch(/ehr_schedule_appointments\{tenant="clinic-a",result="not checked"\} 4/);
    // Still not checkable next round: counted, not listed twice, nothing written.
    const again = await round();
    expect(again.lastCounts).toMatchObject({ notChecked: 4 });
    expect((await request(h.url).get('/metrics')).text).toMatch(
      /ehr_schedule_appointments\{tenant="clinic-a",result="not checked"\} 4/,
    );
  });

  it('follows a moved start, a cancellation and a new appointment', async () => {
    const p = await patient();
    await coverage(p.id, 'DAMAN');
    const moving = await appointment(p.id);
    const q = await patient();
    await coverage(q.id, 'DAMAN');
    const cancelling = await appointment(q.id);
    await round();
    const before = await booked(moving.id);
    expect(before).not.toBeNull();

    const later = Date.parse(moving.start!) + HOUR;
    await ehr.update({
      ...moving,
      start: new Date(later).toISOString(),
      end: new Date(later + 900_000).toISOString(),
    });
    await ehr.update({ ...cancelling, status: 'cancelled' });
    const r = await patient();
    await coverage(r.id, 'THIQA');
    const fresh = await appointment(r.id);
    const result = await round();
    expect(result.lastCounts).toMatchObject({ booked: 1, moved: 1, cancelled: 1 });

    const moved = await booked(moving.id);
    expect(moved?.id).toBe(before?.id);
    expect(moved?.startAt).toBe(later);
    expect(moved?.dueAt).toBe(later - 2 * HOUR);
    expect(moved?.input.request.servicedPeriod?.start).toBe(new Date(later).toISOString());
    const cancelled = await booked(cancelling.id);
    expect(cancelled?.state).toBe('cancelled');
    const read = await request(h.url).get(`/fhir/CoverageEligibilityRequest/${cancelled?.id}`).set(h.auth);
    expect((read.body as CoverageEligibilityRequest).status).toBe('cancelled');
    expect(await booked(fresh.id)).not.toBeNull();
  });

  it('a 500 or a non-JSON answer fails that round only: /ready stays, the next round reads', async () => {
    ehr.fail('/Appointment', 'http-500');
    const down = await round();
    expect(down.lastOutcome).toBe('ehr-unavailable');
    expect(down.lastProblem).toBe('The FHIR server answered HTTP 500');
    expect((await request(h.url).get('/ready')).status).toBe(200);
    ehr.fail('/Appointment', 'not-json');
    const garbage = await round();
    expect(garbage.lastOutcome).toBe('ehr-garbage');
    expect((await request(h.url).get('/ready')).status).toBe(200);
    const p = await patient();
    await coverage(p.id, 'DAMAN');
    const a = await appointment(p.id);
    const back = await round();
    expect(back.lastOutcome).toBe('ok');
    expect(await booked(a.id)).not.toBeNull();
    const metrics = (await request(h.url).get('/metrics')).text;
    expect(metrics).toMatch(/ehr_schedule_rounds_total\{tenant="clinic-a",outcome="ehr-unavailable"\} 1/);
    expect(metrics).toMatch(/ehr_schedule_rounds_total\{tenant="clinic-a",outcome="ehr-garbage"\} 1/);
  });

  it('never follows a next link to another origin', async () => {
    ehr.fail('/Appointment', 'next-elsewhere');
    const r = await round();
    expect(r.lastOutcome).toBe('ehr-garbage');
    expect(r.lastProblem).toContain('outside its base');
    expect(elsewhere.received).toHaveLength(0);
  });

  it('keeps its access token until it nears expiry, then asks for a new one', async () => {
    const granted = ehr.tokens.granted;
    await round();
    await round();
    expect(ehr.tokens.granted).toBe(granted);
    expect(ehr.tokens.refused).toEqual([]);
    offset += (TOKEN_SECONDS - 30) * 1000;
    await round();
    expect(ehr.tokens.granted).toBe(granted + 1);
    expect(ehr.tokens.refused).toEqual([]);
  });

  it('the operator sees the last round and can start one; others cannot', async () => {
    const view = await request(h.url).get('/app/api/operator').set(h.auth);
    expect(view.status).toBe(200);
    expect((view.body as { ehrSchedule: unknown }).ehrSchedule).toMatchObject({
      everyMinutes: 15,
      last: { outcome: 'ok', booked: expect.any(Number) },
    });
    const started = await request(h.url).post('/app/api/ehr-schedule/rounds').set(h.auth);
    expect(started.status).toBe(202);
    const none = await request(h.url).post('/app/api/ehr-schedule/rounds').set(h.authB);
    expect(none.status).toBe(404);
    expectValidFhir(none.body);
  });

  it('publishes the public part of its client key at /.well-known/jwks.json', async () => {
    const res = await request(h.url).get('/.well-known/jwks.json');
    expect(res.status).toBe(200);
    const { keys } = JSON.parse(res.text) as { keys: Record<string, unknown>[] };
    const key = keys.find((k) => k.kid === settings.clientKeys.keys[0]!.kid);
    expect(key).toMatchObject({ kty: 'EC', crv: 'P-384', alg: 'ES384' });
    expect(key).not.toHaveProperty('d');
  });

  it('writes no patient data and no token to the log', () => {
    const text = h.logs.join('\n');
    expect(text).toContain('EHR schedule read');
    for (const secret of [...secrets, ...ehr.issued]) expect(text).not.toContain(secret);
  });
});
