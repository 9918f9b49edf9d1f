/**
 * The desk first (docs/queue.md) through the real HTTP API against the sandbox: every way a check
 * is created gives it its class, priority and deadline once, stored with it: `$submit` sync and
 * async, the page's `$submit`, a CDS patient-view are desk work; a batch entry, an appointment's
 * booking check and re-check, a CDS appointment-book are background work; `stat` makes any of them
 * desk work and `deferred` background. The service's clock is a test's (the re-check's due time).
 */
import type { Bundle, CoverageEligibilityResponse } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Check } from '../../src/checks/store/check-store.js';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';
import type { RequestOptions } from '../support/requests.js';
import { postSubmit } from '../support/submit.js';
import { until } from '../support/until.js';
import { emiratesId } from '../support/emirates-id.js';
import { clientKey, type ClientKey } from '../support/smart.js';
import { appointment, cdsJwt, hookRequest } from '../support/cds.js';

const MIN = 60_000;
const HOUR = 60 * MIN;
const ISS = 'https://ehr.example.org';
/** The service's clock: real time plus this offset, which a test moves forward. */
let offset = 0;
const now = () => Date.now() + offset;
let h: Harness;
let key: ClientKey;

beforeAll(async () => {
  key = await clientKey('ES384');
  h = await startHarness({
    overrides: { now },
    cdsClients: { a: [{ iss: ISS, jwks: { keys: [key.publicJwk] }, fhirServers: [] }] },
  });
});
afterAll(async () => {
  await h.stop();
});

let patients = 0;
function patient(): string {
  patients += 1;
  return emiratesId(1984, 6_100_000 + patients);
}

async function allIds(): Promise<Set<string>> {
  const { checks } = await h.server.store.search('clinic-a', {}, { count: 1000, offset: 0, total: false });
  return new Set(checks.map((c) => c.id));
}

/** The checks created by `act`, oldest first. */
async function created(act: () => Promise<unknown>): Promise<Check[]> {
  const before = await allIds();
  await act();
  const { checks } = await h.server.store.search('clinic-a', {}, { count: 1000, offset: 0, total: false });
  return checks.filter((c) => !before.has(c.id)).sort((a, b) => a.createdAt - b.createdAt);
}

async function onlyCreated(act: () => Promise<unknown>): Promise<Check> {
  const checks = await created(act);
  expect(checks).toHaveLength(1);
  return checks[0]!;
}

function submit(options: RequestOptions, headers: Record<string, string> = {}) {
  return postSubmit(h.url, h.auth, { emiratesId: patient(), ...options }, headers).then((res) => {
    expect([200, 202]).toContain(res.status);
    expectValidFhir(res.body);
    return res;
  });
}

function batch(entries: RequestOptions[]) {
  const bundle = {
    resourceType: 'Bundle',
    type: 'batch',
    entry: entries.map((options) => ({
      resource: eligibilityRequest({ emiratesId: patient(), ...options }),
      request: { method: 'POST', url: 'CoverageEligibilityRequest/$submit' },
    })),
  };
  return request(h.url)
    .post('/fhir')
    .set(h.auth)
    .set('Content-Type', 'application/fhir+json')
    .send(bundle)
    .then((res) => {
      expect(res.status).toBe(200);
      expectValidFhir(res.body as Bundle);
      return res;
    });
}

async function hook(service: string, body: Record<string, unknown>) {
  const base = `http://localhost:${new URL(h.url).port}`;
  const token = await cdsJwt(key, { aud: `${base}/cds-services/${service}`, iss: ISS });
  const res = await request(h.url)
    .post(`/cds-services/${service}`)
    .set('Authorization', `Bearer ${token}`)
    .send(body);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res;
}

describe('a check is given its class once, where it is created', () => {
  it('$submit for now, sync and async, is desk work of normal priority', async () => {
    const sync = await onlyCreated(() => submit({}, { Prefer: 'wait=1' }));
    expect(sync).toMatchObject({ queueClass: 'desk', priority: 'normal', queueDeadlineAt: sync.createdAt });
    const async = await onlyCreated(() => submit({}, { Prefer: 'respond-async' }));
    expect(async).toMatchObject({ queueClass: 'desk', priority: 'normal', queueDeadlineAt: async.createdAt });
    // `normal` changes nothing.
    const normal = await onlyCreated(() => submit({ priority: 'normal' }, { Prefer: 'respond-async' }));
    expect(normal).toMatchObject({ queueClass: 'desk', priority: 'normal' });
  });

  it("the page's check (its $submit with Prefer: wait=1, under /app/api with a session or /fhir with a key) is desk work", async () => {
    // The page sends what app/main.js requestBody builds: no priority, the visit today.
    const check = await onlyCreated(() =>
      submit({ servicedDate: new Date(now()).toISOString().slice(0, 10) }, { Prefer: 'wait=1' }),
    );
    expect(check).toMatchObject({ queueClass: 'desk', priority: 'normal' });
  });

  it('$submit with priority deferred is background work due BACKGROUND_DEADLINE_MINUTES (60) after arrival; stat is desk', async () => {
    const deferred = await onlyCreated(() => submit({ priority: 'deferred' }, { Prefer: 'respond-async' }));
    expect(deferred).toMatchObject({
      queueClass: 'background',
      priority: 'deferred',
      queueDeadlineAt: deferred.createdAt + 60 * MIN,
    });
    const stat = await onlyCreated(() => submit({ priority: 'stat' }, { Prefer: 'respond-async' }));
    expect(stat).toMatchObject({ queueClass: 'desk', priority: 'stat' });
  });

  it('a batch entry is background work; a stat batch entry is desk work', async () => {
    const checks = await created(() => batch([{}, { priority: 'stat' }, { priority: 'deferred' }]));
    expect(checks).toHaveLength(3);
    const byPriority = new Map(checks.map((c) => [c.priority, c]));
    const plain = byPriority.get('normal')!;
    expect(plain).toMatchObject({ queueClass: 'background', queueDeadlineAt: plain.createdAt + 60 * MIN });
    expect(byPriority.get('stat')).toMatchObject({ queueClass: 'desk' });
    expect(byPriority.get('deferred')).toMatchObject({ queueClass: 'background' });
  });

  it("an appointment's booking check and its re-check are background work due at its start, however booked", async () => {
    const start = now() + 24 * HOUR;
    const servicedPeriod = { start: new Date(start).toISOString() };
    // Booked by $submit.
    const booking = await onlyCreated(() => submit({ servicedPeriod }, { Prefer: 'respond-async' }));
    expect(booking).toMatchObject({ queueClass: 'background', priority: 'normal', queueDeadlineAt: start });
    // Booked in a batch (the same rule: an appointment's start, not arrival + 60 min).
    const inBatch = await onlyCreated(() => batch([{ servicedPeriod }]));
    expect(inBatch).toMatchObject({ queueClass: 'background', queueDeadlineAt: start });
    // A stat booking is desk work.
    const stat = await onlyCreated(() =>
      submit({ servicedPeriod, priority: 'stat' }, { Prefer: 'respond-async' }),
    );
    expect(stat).toMatchObject({ queueClass: 'desk', priority: 'stat' });

    // The re-check at start - lead (120 min): background, due at the same start.
    const appointmentId = booking.request.id ?? '';
    await until(async () =>
      (await h.server.store.get('clinic-a', booking.id))?.outcome !== 'queued' ? true : undefined,
    );
    offset += 22 * HOUR + MIN;
    h.server.previsit.wake();
    const rechecked = await until(async () => {
      const a = await h.server.store.appointments.get('clinic-a', appointmentId);
      return a?.recheckId ? a : undefined;
    });
    const recheck = await h.server.store.get('clinic-a', rechecked.recheckId!);
    expect(recheck).toMatchObject({ queueClass: 'background', priority: 'normal', queueDeadlineAt: start });
    offset -= 22 * HOUR + MIN;
  });

  it('CDS appointment-book checks are background work due at the appointment; patient-view is desk work', async () => {
    const startIso = new Date(now() + 30 * HOUR).toISOString();
    // The patient's own checks (an earlier test's re-checks may be created meanwhile).
    const ofPatient = (id: string) => (checks: Check[]) => checks.filter((c) => c.patientKey?.endsWith(id));
    const booker = patient();
    const booked = ofPatient(booker)(
      await created(() =>
        hook(
          'eligibility-appointment-book',
          hookRequest('appointment-book', {
            patient: { emiratesId: booker },
            appointments: [appointment('q1', startIso)],
          }),
        ),
      ),
    );
    expect(booked.length).toBeGreaterThan(0);
    for (const check of booked)
      expect(check).toMatchObject({ queueClass: 'background', queueDeadlineAt: Date.parse(startIso) });
    const viewer = patient();
    const viewed = ofPatient(viewer)(
      await created(() =>
        hook('eligibility-patient-view', hookRequest('patient-view', { patient: { emiratesId: viewer } })),
      ),
    );
    expect(viewed.length).toBeGreaterThan(0);
    for (const check of viewed) expect(check).toMatchObject({ queueClass: 'desk', priority: 'normal' });
  });
});

describe('a queued CER says where its check stands', () => {
  it('how many checks are ahead and about when it will be sent, validated; nothing of it once sent', async () => {
    // A tenant of its own with one slot, held by a slow check.
    const slow = await startHarness({ maxInFlight: 1, timeScale: 0.2 });
    try {
      const send = (options: RequestOptions) =>
        postSubmit(slow.url, slow.auth, { emiratesId: patient(), ...options }, { Prefer: 'wait=0' });
      await send({});
      await send({});
      const third = await send({});
      const cer = third.body as CoverageEligibilityResponse;
      expectValidFhir(cer);
      expect(cer.outcome).toBe('queued');
      // One check runs in the only slot, one waits ahead of this one.
      expect(cer.disposition).toMatch(
        /^Waiting to be sent to the payer portal: 1 check ahead, about \d+ min\.$/,
      );
      expect(cer.text?.div).toContain('1 check ahead, about');
      const path = new URL(String(third.headers.location)).pathname;
      const sent = await until(
        async () => {
          const res = await request(slow.url).get(path).set(slow.auth);
          const body = res.body as CoverageEligibilityResponse;
          return body.disposition?.startsWith('Waiting') ? undefined : body;
        },
        60_000,
        'the third check sent',
      );
      expectValidFhir(sent);
      expect(sent.text?.div).not.toContain('checks ahead');
      // /metrics: the line per class now, and the wait from accepted to sent, per class.
      await until(async () => {
        const { checks } = await slow.server.store.search(
          'clinic-a',
          {},
          { count: 10, offset: 0, total: false },
        );
        return checks.every((c) => c.state === 'done') ? true : undefined;
      });
      const metrics = (await request(slow.url).get('/metrics')).text;
      expect(metrics).toMatch(/eligibility_checks_waiting\{class="desk"\} 0/);
      expect(metrics).toMatch(/eligibility_checks_waiting\{class="background"\} 0/);
      expect(metrics).toMatch(/eligibility_queue_wait_seconds_count\{class="desk"\} 3/);
      // The later two waited for a task or two: not all within 50 ms.
      expect(metrics).toMatch(/eligibility_queue_wait_seconds_bucket\{le="0.05",class="desk"\} [0-2]\n/);
    } finally {
      await slow.stop();
    }
  }, 90_000);
});
