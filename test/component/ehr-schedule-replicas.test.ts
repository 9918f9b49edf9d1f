/**
 * The EHR's schedule across replicas (docs/ehr-schedule.md): two service instances on one
 * PostgreSQL store read the same clinic's schedule; each round is taken by one of them (the
 * tenant's round row, leased), so the EHR is read once per period, not once per replica.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EhrSchedule } from '../../src/config.js';
import type { FhirEhr } from '../support/fhir-ehr.js';
import { clientKeyPair, startFhirEhr } from '../support/fhir-ehr.js';
import type { Harness } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import { createTestSchema, type TestSchema } from '../support/postgres.js';
import { until } from '../support/until.js';

const TENANT = 'clinic-a';
let ehr: FhirEhr;
let one: Harness | undefined;
let two: Harness | undefined;
let schema: TestSchema | undefined;

beforeAll(async () => {
  schema = await createTestSchema('ehr_schedule');
  const keys = await clientKeyPair();
  ehr = await startFhirEhr({ clientId: 'adapter', publicJwks: { keys: [keys.publicJwk] } });
  const settings: EhrSchedule = {
    fhirBaseUrl: ehr.fhirBase,
    clientId: 'adapter',
    clientKeys: { keys: [keys.privateJwk] },
    scope: 'system/Appointment.rs system/Patient.rs system/Coverage.rs',
    // A round every 3 s: both replicas look every second.
    everyMinutes: 0.05,
    daysAhead: 2,
    search: [],
  };
  // One after the other: the second finds the schema migrated.
  one = await startHarness({ databaseUrl: schema.url, ehrSchedule: { a: settings } });
  two = await startHarness({ databaseUrl: schema.url, ehrSchedule: { a: settings } });
}, 60_000);

afterAll(async () => {
  await one?.stop();
  await two?.stop();
  await ehr.close();
  await schema?.drop();
});

const searches = () => ehr.requests.filter((r) => r.startsWith('/fhir/Appointment?')).length;

describe('two replicas on one PostgreSQL store', () => {
  it('read the schedule once per period between them', async () => {
    if (!one || !two) throw new Error('replicas not started');
    await until(() => (searches() > 0 ? true : undefined), 10_000, 'the first round');
    const from = searches();
    const started = Date.now();
    await new Promise((r) => setTimeout(r, 7_000));
    const periods = (Date.now() - started) / 3_000;
    const rounds = searches() - from;
    // One replica per round: at most one round per period begun (each replica alone would read
    // about as often again).
    expect(rounds).toBeGreaterThanOrEqual(1);
    expect(rounds).toBeLessThanOrEqual(Math.ceil(periods) + 1);
  }, 30_000);

  it('"read now" on both at once makes one round', async () => {
    if (!one || !two) throw new Error('replicas not started');
    const round = await one.server.ehrSchedule.lastRound(TENANT);
    const from = searches();
    // Right after a round, so no periodic round falls in the next second.
    await until(
      async () =>
        (await one!.server.ehrSchedule.lastRound(TENANT))?.lastAt !== round?.lastAt ? true : undefined,
      10_000,
      'a round',
    );
    const after = searches();
    await Promise.all([one.server.ehrSchedule.readNow(TENANT), two.server.ehrSchedule.readNow(TENANT)]);
    await new Promise((r) => setTimeout(r, 1_500));
    expect(searches() - after).toBe(1);
    expect(after).toBeGreaterThan(from);
  }, 30_000);
});
