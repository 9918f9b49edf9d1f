/// <reference lib="dom" />
/**
 * The schedule read from the EHR (docs/ehr-schedule.md) on /app/ in real Chromium, against the
 * running service, the sandbox and an EHR the test starts (test/support/fhir-ehr.ts), over real
 * HTTP: the Appointments of the day say which came from the EHR's schedule and list the one that
 * could not be checked with its reason; the operator view says when the schedule was last read
 * and what it found, and its "Read the schedule now" button reads it again.
 */
import type { Browser } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { localDay } from '../../src/checks/previsit.js';
import { emiratesId } from '../support/emirates-id.js';
import type { FhirEhr } from '../support/fhir-ehr.js';
import { clientKeyPair, startFhirEhr } from '../support/fhir-ehr.js';
import type { Harness } from '../support/harness.js';
import { TENANT_A_KEY, startHarness } from '../support/harness.js';
import { until } from '../support/until.js';
import type { Watched } from './support.js';
import { closeOpened, launchChromium, openWatched, signIn } from './support.js';

const HOUR = 3_600_000;
const V2_0203 = 'http://terminology.hl7.org/CodeSystem/v2-0203';
let harness: Harness;
let ehr: FhirEhr;
let browser: Browser;
let launchError: Error | undefined;
const opened: Watched[] = [];
/** Tomorrow in the clinic's zone (Asia/Dubai), where the EHR's appointments are. */
let tomorrow = '';

beforeAll(async () => {
  const launched = launchChromium().catch((error: unknown) => {
    launchError = error instanceof Error ? error : new Error(String(error));
    return undefined;
  });
  const keys = await clientKeyPair();
  ehr = await startFhirEhr({ clientId: 'adapter', publicJwks: { keys: [keys.publicJwk] } });
  tomorrow = localDay(Date.now() + 24 * HOUR, 'Asia/Dubai');
  const insured = await ehr.create({
    resourceType: 'Patient',
    identifier: [{ type: { coding: [{ system: V2_0203, code: 'NI' }] }, value: emiratesId(1990, 1) }],
    name: [{ given: ['Aisha'], family: 'Testpatient' }],
  });
  await ehr.create({
    resourceType: 'Coverage',
    status: 'active',
    beneficiary: { reference: `Patient/${insured.id}` },
    payor: [{ identifier: { type: { coding: [{ system: V2_0203, code: 'NIIP' }] }, value: 'DAMAN' } }],
  });
  const uninsured = await ehr.create({
    resourceType: 'Patient',
    identifier: [{ type: { coding: [{ system: V2_0203, code: 'NI' }] }, value: emiratesId(1991, 77) }],
    name: [{ given: ['Omar'], family: 'Uninsured' }],
  });
  for (const [patient, time] of [
    [insured.id, '09:30'],
    [uninsured.id, '10:45'],
  ] as const)
    await ehr.create({
      resourceType: 'Appointment',
      status: 'booked',
      start: `${tomorrow}T${time}:00+04:00`,
      participant: [{ actor: { reference: `Patient/${patient}` }, status: 'accepted' }],
    });
  [harness, browser] = (await Promise.all([
    startHarness({
      timeScale: 0.01,
      ehrSchedule: {
        a: {
          fhirBaseUrl: ehr.fhirBase,
          clientId: 'adapter',
          clientKeys: { keys: [keys.privateJwk] },
          scope: 'system/Appointment.rs system/Patient.rs system/Coverage.rs',
          everyMinutes: 15,
          daysAhead: 2,
          search: [],
        },
      },
    }),
    launched,
  ])) as [Harness, Browser];
  // The round at start-up.
  await until(async () => (await harness.server.ehrSchedule.lastRound('clinic-a'))?.lastAt ?? undefined);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await harness?.stop();
  await ehr?.close();
  expect(harness.logs.filter((line) => line.includes(TENANT_A_KEY))).toEqual([]);
});

afterEach(async () => {
  for (const { urls, elsewhere } of await closeOpened(opened)) {
    expect(elsewhere).toEqual([]);
    expect(urls.filter((url) => url.includes(TENANT_A_KEY))).toEqual([]);
  }
});

describe('the schedule from the EHR on the page', () => {
  it('lists where each appointment came from, the one not checked with why, and the last round with its button', async () => {
    const { page } = await openWatched(opened, browser, launchError, harness.url);
    await signIn(page, harness.url, TENANT_A_KEY);
    const section = page.getByRole('region', { name: 'Appointments' });
    const day = section.getByLabel('Day');
    await expect.poll(() => day.inputValue()).not.toBe('');
    await day.fill(tomorrow);
    await day.dispatchEvent('change');
    const rows = section.locator('tbody tr');
    await expect.poll(() => rows.count()).toBe(2);
    const [booked, notChecked] = await rows.allInnerTexts();
    expect(booked).toContain('09:30');
    expect(booked).toContain('Aisha Testpatient');
    expect(booked).toContain('EHR schedule');
    expect(await rows.nth(0).getByRole('button', { name: /Open/ }).count()).toBe(1);
    expect(notChecked).toContain('10:45');
    expect(notChecked).toContain('Omar Uninsured');
    expect(notChecked).toContain('Not checked: no active Coverage');
    expect(await rows.nth(1).getByRole('button').count()).toBe(0);

    await page.getByRole('tab', { name: 'Operator' }).click();
    const schedule = page.getByRole('region', { name: 'EHR schedule' });
    await expect
      .poll(() => schedule.innerText())
      .toMatch(/Last read .*: read: 2 appointments, 1 booked, 0 moved, 0 cancelled, 1 not checked/);
    const before = await schedule.locator('#ehr-schedule-last').innerText();
    const searches = ehr.requests.filter((r) => r.startsWith('/fhir/Appointment?')).length;
    await schedule.getByRole('button', { name: 'Read the schedule now' }).click();
    await expect
      .poll(() => schedule.locator('#ehr-schedule-last').innerText(), { timeout: 15_000 })
      .not.toBe(before);
    expect(await schedule.locator('#ehr-schedule-last').innerText()).toMatch(
      /0 booked, 0 moved, 0 cancelled, 1 not checked/,
    );
    expect(ehr.requests.filter((r) => r.startsWith('/fhir/Appointment?')).length).toBe(searches + 1);
  });
});
