/**
 * Pre-visit checks (docs/previsit.md) through the real HTTP API against the sandbox, with an
 * injected clock that the test moves forward (no test sleeps for hours): the booking check runs
 * at once; the re-check at start - lead is a new check of the same stored request, notified and
 * reused at check-in; it is skipped when the booking answer is still reusable at the start, not
 * doubled while the booking check runs, never sent after a cancel; bad serviced[x] is a 422.
 */
import type {
  AuditEvent,
  Bundle,
  CapabilityStatement,
  CoverageEligibilityRequest,
  CoverageEligibilityResponse,
  OperationOutcome,
  SearchParameter,
} from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { countingUpstream, startHarness } from '../support/harness.js';
import { postSubmit } from '../support/submit.js';
import type { RequestOptions } from '../support/requests.js';
import { eligibilityRequest } from '../support/requests.js';
import { until } from '../support/until.js';
import { emiratesId } from '../support/emirates-id.js';

const MIN = 60_000;
const HOUR = 60 * MIN;
const counts = { create: 0, poll: 0 };
/** The service's clock runs with real time, plus this offset the tests move forward. */
let offset = 0;
const now = () => Date.now() + offset;
let h: Harness;

beforeAll(async () => {
  h = await startHarness({
    reuseWindowMinutes: 240,
    overrides: { upstream: countingUpstream(counts), now },
  });
});
afterAll(async () => {
  await h.stop();
});

/** Moves the service's clock forward and lets the re-check worker look at once. */
function advance(ms: number): void {
  offset += ms;
  h.server.previsit.wake();
}

let patients = 0;
/** A fresh patient, so reuse between tests never mixes them up. */
function patient(): string {
  patients += 1;
  return emiratesId(1985, 7_000_000 + patients);
}

async function book(options: RequestOptions, auth = h.auth) {
  const res = await postSubmit(h.url, auth, options, { Prefer: 'wait=10' });
  expectValidFhir(res.body);
  return res;
}

/** The appointment stored for a booking answer's request. */
async function appointmentOf(requestId: string) {
  const appointment = await h.server.store.appointments.get('clinic-a', requestId);
  if (!appointment) throw new Error(`no appointment ${requestId}`);
  return appointment;
}

function requestIdOf(cer: CoverageEligibilityResponse): string {
  return (cer.request?.reference ?? '').split('/')[1] ?? '';
}

describe('a booked appointment', () => {
  it('is checked at booking, re-checked at start - lead as a new check of the same request, and answered by reuse at check-in', async () => {
    const id = patient();
    const start = now() + 24 * HOUR;
    const before = counts.create;
    const booked = await book({ emiratesId: id, servicedPeriod: { start: new Date(start).toISOString() } });
    expect(booked.status).toBe(200);
    const bookingCer = booked.body as CoverageEligibilityResponse;
    expect(bookingCer.outcome).toBe('complete');
    const requestId = requestIdOf(bookingCer);
    const appointment = await appointmentOf(requestId);
    expect(appointment).toMatchObject({ state: 'scheduled', bookingCheckId: bookingCer.id, startAt: start });
    expect(appointment.dueAt).toBe(start - 2 * HOUR);
    expect(counts.create).toBe(before + 1);

    // A minute before it is due: nothing.
    advance(22 * HOUR - MIN);
    await new Promise((r) => setTimeout(r, 300));
    expect((await appointmentOf(requestId)).state).toBe('scheduled');

    advance(MIN);
    const rechecked = await until(
      async () => {
        const a = await appointmentOf(requestId);
        return a.state === 'rechecked' ? a : undefined;
      },
      10_000,
      'the re-check',
    );
    const recheckId = rechecked.recheckId ?? '';
    expect(recheckId).not.toBe(bookingCer.id);
    const recheck = await until(async () => {
      const res = await request(h.url).get(`/fhir/CoverageEligibilityResponse/${recheckId}`).set(h.auth);
      const cer = res.body as CoverageEligibilityResponse;
      return cer.outcome === 'complete' ? cer : undefined;
    });
    expectValidFhir(recheck);
    expect(recheck.request?.reference).toBe(`CoverageEligibilityRequest/${requestId}`);
    // `created`: when it ran (the service's clock), 22 hours after the booking answer.
    expect(Date.parse(recheck.created) - Date.parse(bookingCer.created)).toBeGreaterThan(22 * HOUR - MIN);
    expect(counts.create).toBe(before + 2);
    // The booking CER stays as it was.
    const booking = await request(h.url)
      .get(`/fhir/CoverageEligibilityResponse/${bookingCer.id}`)
      .set(h.auth);
    expect((booking.body as CoverageEligibilityResponse).meta?.versionId).toBe(bookingCer.meta?.versionId);

    // Check-in at the start: the EHR's fresh $submit is answered by reuse of the re-check.
    advance(2 * HOUR);
    const checkIn = await postSubmit(h.url, h.auth, { emiratesId: id });
    expect(checkIn.status).toBe(200);
    expect((checkIn.body as CoverageEligibilityResponse).id).toBe(recheckId);
    expect(checkIn.headers.age).toBeDefined();
    expect(counts.create).toBe(before + 2);

    const metrics = (await request(h.url).get('/metrics')).text;
    expect(metrics).toMatch(/previsit_rechecks_total\{tenant="clinic-a",result="run"\} [1-9]/);
    expect(metrics).toMatch(/previsit_checkins_reused_total\{tenant="clinic-a"\} [1-9]/);
  });

  it('is not re-checked when the booking answer is still reusable at the start (one portal session)', async () => {
    const id = patient();
    const start = now() + 3 * HOUR;
    const before = counts.create;
    const booked = await book({ emiratesId: id, servicedPeriod: { start: new Date(start).toISOString() } });
    const requestId = requestIdOf(booked.body as CoverageEligibilityResponse);
    advance(HOUR);
    await until(
      async () => ((await appointmentOf(requestId)).state === 'skipped' ? true : undefined),
      10_000,
    );
    expect(counts.create).toBe(before + 1);
    expect((await request(h.url).get('/metrics')).text).toMatch(
      /previsit_rechecks_total\{tenant="clinic-a",result="skipped"\} [1-9]/,
    );
  });

  it('booked less than one lead ahead: the booking check is the pre-visit check, never doubled while it runs', async () => {
    const id = patient();
    const start = now() + 30 * MIN;
    const before = counts.create;
    // Answered queued at once: the booking check is still running when the re-check is due.
    const booked = await postSubmit(
      h.url,
      h.auth,
      { emiratesId: id, servicedPeriod: { start: new Date(start).toISOString() } },
      { Prefer: 'wait=0' },
    );
    const cer = booked.body as CoverageEligibilityResponse;
    expect(cer.outcome).toBe('queued');
    const requestId = requestIdOf(cer);
    h.server.previsit.wake();
    await until(
      async () => ((await appointmentOf(requestId)).state === 'skipped' ? true : undefined),
      15_000,
    );
    expect(counts.create).toBe(before + 1);
  });

  it('a servicedDate of a later day is an appointment at the clinic day start; today is none', async () => {
    const tomorrow = new Date(now() + 48 * HOUR).toISOString().slice(0, 10);
    const booked = await book({ emiratesId: patient(), servicedDate: tomorrow });
    const requestId = requestIdOf(booked.body as CoverageEligibilityResponse);
    const appointment = await appointmentOf(requestId);
    // 08:00 in Asia/Dubai is 04:00 UTC.
    expect(new Date(appointment.startAt).toISOString()).toBe(`${tomorrow}T04:00:00.000Z`);
    const today = new Date(now() + 4 * HOUR).toISOString().slice(0, 10);
    const plain = await book({ emiratesId: patient(), servicedDate: today });
    expect(
      await h.server.store.appointments.get(
        'clinic-a',
        requestIdOf(plain.body as CoverageEligibilityResponse),
      ),
    ).toBeNull();
  });

  it('a batch entry books an appointment too', async () => {
    const start = now() + 30 * HOUR;
    const res = await request(h.url)
      .post('/fhir')
      .set(h.auth)
      .set('Content-Type', 'application/fhir+json')
      .send({
        resourceType: 'Bundle',
        type: 'batch',
        entry: [
          {
            request: { method: 'POST', url: 'CoverageEligibilityRequest/$submit' },
            resource: eligibilityRequest({
              emiratesId: patient(),
              servicedPeriod: { start: new Date(start).toISOString() },
            }),
          },
        ],
      });
    expect(res.status).toBe(200);
    const entry = (res.body as Bundle).entry?.[0];
    const cer = entry?.resource as CoverageEligibilityResponse;
    expect((await appointmentOf(requestIdOf(cer))).startAt).toBe(start);
  });

  it('the same identifier again returns the appointment booked, never a second one', async () => {
    const start = now() + 26 * HOUR;
    const options = {
      emiratesId: patient(),
      identifier: `appt-${Date.now()}`,
      servicedPeriod: { start: new Date(start).toISOString() },
    };
    const first = await book(options);
    const again = await book(options);
    expect(again.headers.location).toBe(first.headers.location);
  });

  it('a cancelled appointment (JSON Patch) is never re-checked; the request shows status cancelled', async () => {
    const start = now() + 24 * HOUR;
    const booked = await book({
      emiratesId: patient(),
      servicedPeriod: { start: new Date(start).toISOString() },
    });
    const requestId = requestIdOf(booked.body as CoverageEligibilityResponse);
    const res = await patch(requestId, CANCEL);
    expect(res.status).toBe(200);
    expectValidFhir(res.body);
    expect((res.body as CoverageEligibilityRequest).status).toBe('cancelled');
    const read = await request(h.url).get(`/fhir/CoverageEligibilityRequest/${requestId}`).set(h.auth);
    expect((read.body as CoverageEligibilityRequest).status).toBe('cancelled');
    const before = counts.create;
    advance(23 * HOUR);
    await new Promise((r) => setTimeout(r, 500));
    expect((await appointmentOf(requestId)).state).toBe('cancelled');
    expect(counts.create).toBe(before);
    expect((await request(h.url).get('/metrics')).text).toMatch(
      /previsit_rechecks_total\{tenant="clinic-a",result="cancelled"\} [1-9]/,
    );
    // Audited as a patch of the request.
    await h.server.audit.flush();
    const audit = await request(h.url)
      .get(`/fhir/AuditEvent?entity=CoverageEligibilityRequest/${requestId}`)
      .set(h.auth);
    const events = ((audit.body as Bundle).entry ?? []).map((e) => e.resource as AuditEvent);
    expect(events.some((e) => e.subtype?.some((c) => c.code === 'patch'))).toBe(true);
  });
});

const CANCEL = [{ op: 'replace', path: '/status', value: 'cancelled' }];

function patch(id: string, body: unknown, type = 'application/json-patch+json', auth = h.auth) {
  return request(h.url)
    .patch(`/fhir/CoverageEligibilityRequest/${id}`)
    .set(auth)
    .set('Content-Type', type)
    .send(JSON.stringify(body));
}

describe('PATCH of a stored request', () => {
  let requestId = '';
  beforeAll(async () => {
    const booked = await book({
      emiratesId: patient(),
      servicedPeriod: { start: new Date(now() + 20 * HOUR).toISOString() },
    });
    requestId = requestIdOf(booked.body as CoverageEligibilityResponse);
  });

  it.each([
    [
      'another status',
      [{ op: 'replace', path: '/status', value: 'active' }],
      'CoverageEligibilityRequest.status',
    ],
    [
      'another element',
      [{ op: 'replace', path: '/servicedPeriod/start', value: '2030-01-01T00:00:00Z' }],
      'CoverageEligibilityRequest.servicedPeriod.start',
    ],
    ['an item', [{ op: 'remove', path: '/item/0' }], 'CoverageEligibilityRequest.item[0]'],
    ['no JSON Patch at all', { status: 'cancelled' }, 'CoverageEligibilityRequest'],
  ])('%s is a 422 naming the element, and the request is unchanged', async (_name, body, expression) => {
    const res = await patch(requestId, body);
    expect(res.status).toBe(422);
    expectValidFhir(res.body);
    expect((res.body as OperationOutcome).issue[0]?.expression).toEqual([expression]);
    expect((await appointmentOf(requestId)).state).toBe('scheduled');
  });

  it('another content type is a 415', async () => {
    const res = await patch(requestId, CANCEL, 'application/fhir+json');
    expect(res.status).toBe(415);
    expectValidFhir(res.body);
  });

  it('an unknown id, or another tenant, is a 404', async () => {
    expect((await patch('no-such-request', CANCEL)).status).toBe(404);
    expect((await patch(requestId, CANCEL, 'application/json-patch+json', h.authB)).status).toBe(404);
    expect((await appointmentOf(requestId)).state).toBe('scheduled');
  });
});

describe('search by serviced', () => {
  it("lists the tenant's appointments of a local day, with their answers by _revinclude", async () => {
    // 23:30 UTC is 03:30 the next day in Dubai: the clinic's day, not UTC's, decides.
    const base = new Date(now() + 72 * HOUR);
    const day = Date.UTC(base.getUTCFullYear(), base.getUTCMonth(), base.getUTCDate(), 23, 30);
    const localDay = new Date(day + 4 * HOUR).toISOString().slice(0, 10);
    const booked = await book({
      emiratesId: patient(),
      servicedPeriod: { start: new Date(day).toISOString() },
    });
    const requestId = requestIdOf(booked.body as CoverageEligibilityResponse);
    await book(
      { emiratesId: patient(), servicedPeriod: { start: new Date(day + 24 * HOUR).toISOString() } },
      h.authB,
    );

    const res = await request(h.url)
      .get(
        `/fhir/CoverageEligibilityRequest?serviced=${localDay}&_revinclude=CoverageEligibilityResponse:request`,
      )
      .set(h.auth);
    expect(res.status).toBe(200);
    const bundle = res.body as Bundle;
    expectValidFhir(bundle);
    const matches = (bundle.entry ?? []).filter((e) => e.search?.mode === 'match');
    expect(matches.map((e) => e.resource?.id)).toEqual([requestId]);
    const included = (bundle.entry ?? []).filter((e) => e.search?.mode === 'include');
    expect(included.map((e) => e.resource?.id)).toEqual([(booked.body as CoverageEligibilityResponse).id]);

    const utcDay = new Date(day).toISOString().slice(0, 10);
    const other = await request(h.url).get(`/fhir/CoverageEligibilityRequest?serviced=${utcDay}`).set(h.auth);
    expect(((other.body as Bundle).entry ?? []).map((e) => e.resource?.id)).not.toContain(requestId);
    for (const [query, contains] of [
      [`ge${localDay}`, true],
      [`gt${localDay}`, false],
      [`le${localDay}`, true],
      [`lt${localDay}`, false],
      [`eq${localDay}`, true],
    ] as const) {
      const found = await request(h.url)
        .get(`/fhir/CoverageEligibilityRequest?serviced=${query}`)
        .set(h.auth);
      expect(
        ((found.body as Bundle).entry ?? []).some((e) => e.resource?.id === requestId),
        query,
      ).toBe(contains);
    }
  });

  it('_count=0 gives the total and no next link (a next link to the same empty page would never end)', async () => {
    const start = new Date(now() + 80 * HOUR).toISOString();
    await book({ emiratesId: patient(), servicedPeriod: { start } });
    const res = await request(h.url)
      .get(`/fhir/CoverageEligibilityRequest?serviced=ge${start.slice(0, 10)}&_count=0`)
      .set(h.auth);
    expect(res.status).toBe(200);
    const bundle = res.body as Bundle;
    expectValidFhir(bundle);
    expect(bundle.total).toBeGreaterThan(0);
    expect(bundle.entry).toBeUndefined();
    expect(bundle.link?.map((l) => l.relation)).toEqual(['self']);
  });

  it('the self link names only what the serviced search applied (not _sort, _summary=true, _total)', async () => {
    const day = new Date(now() + 80 * HOUR).toISOString().slice(0, 10);
    const res = await request(h.url)
      .get(
        `/fhir/CoverageEligibilityRequest?serviced=ge${day}&_sort=-created&_summary=true&_total=none&_revinclude=CoverageEligibilityResponse:request`,
      )
      .set(h.auth);
    expect(res.status).toBe(200);
    const self = new URL((res.body as Bundle).link?.find((l) => l.relation === 'self')?.url ?? '');
    expect([...self.searchParams.keys()].sort()).toEqual(['_count', '_revinclude', 'serviced']);
  });

  it('a prefix it does not serve is a 400 naming serviced', async () => {
    const res = await request(h.url)
      .get('/fhir/CoverageEligibilityRequest?serviced=sa2026-11-27')
      .set(h.auth);
    expect(res.status).toBe(400);
    expect((res.body as OperationOutcome).issue[0]?.expression).toEqual(['serviced']);
  });

  it('is declared in the CapabilityStatement with its published SearchParameter', async () => {
    const metadata = (await request(h.url).get('/fhir/metadata')).body as CapabilityStatement;
    const resource = metadata.rest?.[0]?.resource?.find((r) => r.type === 'CoverageEligibilityRequest');
    const serviced = resource?.searchParam?.find((p) => p.name === 'serviced');
    expect(serviced?.type).toBe('date');
    expect(resource?.searchRevInclude).toContain('CoverageEligibilityResponse:request');
    expect(resource?.interaction?.map((i) => i.code)).toContain('patch');
    const id = (serviced?.definition ?? '').split('/').pop() ?? '';
    const parameter = await request(h.url).get(`/fhir/SearchParameter/${id}`);
    expect(parameter.status).toBe(200);
    expectValidFhir(parameter.body);
    expect((parameter.body as SearchParameter).url).toBe(serviced?.definition);
  });
});

describe('bad serviced[x]', () => {
  it.each([
    [
      'a period that ends before it starts',
      { servicedPeriod: { start: '2030-01-02T10:00:00Z', end: '2030-01-02T09:00:00Z' } },
      'CoverageEligibilityRequest.servicedPeriod.end',
    ],
    [
      'an appointment more than 366 days ahead',
      { servicedDate: '2099-01-01' },
      'CoverageEligibilityRequest.servicedDate',
    ],
  ])('%s is a 422 naming the element, and nothing is stored', async (_name, serviced, expression) => {
    const before = counts.create;
    const res = await postSubmit(h.url, h.auth, { emiratesId: patient(), ...serviced });
    expect(res.status).toBe(422);
    const outcome = res.body as OperationOutcome;
    expectValidFhir(outcome);
    expect(outcome.issue[0]?.expression).toEqual([expression]);
    expect(counts.create).toBe(before);
    // The dry run says the same.
    const dry = await request(h.url)
      .post('/fhir/CoverageEligibilityRequest/$validate')
      .set(h.auth)
      .set('Content-Type', 'application/fhir+json')
      .send(eligibilityRequest({ emiratesId: patient(), ...serviced }));
    const issue = (dry.body as OperationOutcome).issue.find((i) => i.severity === 'error');
    expect(issue?.expression).toEqual([expression]);
  });
});
