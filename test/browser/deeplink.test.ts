/// <reference lib="dom" />
/**
 * The deep link to an answer on the front-desk page, `/app/#answer=<CER id>` (docs/cds-hooks.md:
 * the link of a CDS Hooks card), in real Chromium against the running service and the sandbox
 * over real HTTP: a finished check's link opens its result once signed in without the desk
 * submitting anything, at 1280 and 360 px; the link is the one a patient-view card gives; an id
 * that is malformed or unknown leaves the page working, with no page error and no request outside
 * this service's own API.
 */
import { randomUUID } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { cardsOf, cdsJwt, hookRequest } from '../support/cds.js';
import type { Harness } from '../support/harness.js';
import { TENANT_A_KEY, startHarness } from '../support/harness.js';
import type { ClientKey } from '../support/smart.js';
import { clientKey } from '../support/smart.js';
import { submitFinal } from '../support/submit.js';
import { until } from '../support/until.js';
import type { Watched } from './support.js';
import { launchChromium, watchedPage } from './support.js';

const ISS = 'https://ehr.example.org';
const VIEW = 'eligibility-patient-view';

let harness: Harness;
let browser: Browser;
let ehrKey: ClientKey;
/** A found-eligible check at Daman, final before any test runs: its CER id. */
let eligibleId = '';
const opened: (Watched & { errors: Error[] })[] = [];
let launchError: Error | undefined;

beforeAll(async () => {
  const launched = launchChromium().catch((error: unknown) => {
    launchError = error instanceof Error ? error : new Error(String(error));
    return undefined;
  });
  ehrKey = await clientKey('ES384');
  [harness, browser] = (await Promise.all([
    startHarness({
      timeScale: 0.01,
      pollIntervalMs: 50,
      cdsClients: { a: [{ iss: ISS, jwks: { keys: [ehrKey.publicJwk] }, fhirServers: [] }] },
    }),
    launched,
  ])) as [Harness, Browser];
  const path = await submitFinal(harness.url, harness.auth, {
    emiratesId: '784-1990-0000001-0',
    payer: 'DAMAN',
  });
  eligibleId = path.split('/').pop() ?? '';
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await harness?.stop();
  expect(harness.logs.filter((line) => line.includes(TENANT_A_KEY))).toEqual([]);
});

/** A watched page (requests only to `origin`) that also records every uncaught page error. */
async function open(
  origin = harness.url,
  viewport = { width: 1280, height: 900 },
): Promise<Watched & { errors: Error[] }> {
  if (launchError) throw launchError;
  const watched = { ...(await watchedPage(browser, origin, viewport)), errors: [] as Error[] };
  watched.page.on('pageerror', (error) => watched.errors.push(error));
  // A wait that cannot end fails with the locator it waited for, inside the test's 30 s.
  watched.page.setDefaultTimeout(10_000);
  opened.push(watched);
  return watched;
}

afterEach(async () => {
  for (const { context, urls, elsewhere, errors } of opened.splice(0)) {
    await context.close();
    expect(errors.map((e) => e.message)).toEqual([]);
    expect(elsewhere).toEqual([]);
    expect(urls.filter((url) => url.includes(TENANT_A_KEY))).toEqual([]);
  }
});

/** Opens `url` (a deep link) on a fresh tab and signs in there, as a desk that follows a link does. */
async function openAndSignIn(page: Page, url: string): Promise<void> {
  await page.goto(url);
  await page.getByLabel('API key').fill(TENANT_A_KEY);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByLabel('Emirates ID or card number').waitFor();
}

/** The paths (and queries) the page asked of this service, without its own files under /app/. */
function apiPaths(urls: string[]): string[] {
  return urls
    .map((url) => new URL(url))
    .filter((url) => !(url.pathname.startsWith('/app/') && !url.pathname.startsWith('/app/api/')))
    .map((url) => `${url.pathname}${url.search}`);
}

/** What the desk sees of the eligible answer: headline, visit summary, the ids the claim needs. */
async function expectEligibleResult(page: Page): Promise<string> {
  const result = page.getByRole('region', { name: 'Eligibility result' });
  await result.waitFor();
  const text = await result.innerText();
  expect(text).toMatch(/^Eligibility result\s+Eligible at Daman\b/);
  expect(text).toContain('What to collect');
  expect(text).toContain('Consultation (Outpatient, GN+): 20% of the fee, at most AED 50 per visit');
  expect(text).toMatch(/Member id\s+DAMAN-/);
  expect(text).toMatch(/Eligibility id\s+ELG-/);
  expect(await result.getByLabel('Fee (AED)').isVisible()).toBe(true);
  await page.getByRole('status').filter({ hasText: /^Done/ }).waitFor();
  return text;
}

const overflowOf = (page: Page) =>
  page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);

describe('the deep link /app/#answer=<id>', () => {
  it('opens a finished check once signed in, with no check submitted, and drops the hash', async () => {
    const { page, urls } = await open();
    const submits: string[] = [];
    page.on('request', (r) => {
      if (r.method() === 'POST') submits.push(r.url());
    });
    const read = page.waitForResponse((r) =>
      r.url().endsWith(`/fhir/CoverageEligibilityResponse/${eligibleId}`),
    );
    await openAndSignIn(page, `${harness.url}/app/#answer=${eligibleId}`);
    expect((await read).status()).toBe(200);
    await expectEligibleResult(page);
    // Nothing was sent by the desk: no $submit, no POST at all, and the form is still empty.
    expect(submits).toEqual([]);
    expect(await page.getByLabel('Emirates ID or card number').inputValue()).toBe('');
    // The answer is read once, through this service's FHIR API; the link is not kept in the URL.
    expect(apiPaths(urls).filter((p) => p.startsWith('/fhir/CoverageEligibilityResponse/'))).toEqual([
      `/fhir/CoverageEligibilityResponse/${eligibleId}`,
    ]);
    expect(new URL(page.url()).hash).toBe('');
    // The answer shown is the linked one: Estimate asks about that id.
    await page.getByLabel('Fee (AED)').fill('300');
    const asked = page.waitForRequest((r) => r.url().endsWith('/$estimate'));
    await page.getByRole('button', { name: 'Estimate' }).click();
    expect(new URL((await asked).url()).pathname).toBe(
      `/fhir/CoverageEligibilityResponse/${eligibleId}/$estimate`,
    );
    const share = page.getByRole('region', { name: 'Patient share' });
    await share.filter({ hasText: 'Collect AED' }).waitFor();
    const estimated = await share.innerText();
    expect(estimated).toMatch(/^Collect AED 50\.00\b/);
    expect(estimated).toContain(`CoverageEligibilityResponse/${eligibleId}`);
  });

  it('at 360 px: the link of a patient-view card opens its answer in a tab already signed in', async () => {
    // The card link as the CDS service gives it: a real patient-view call with a real EHR JWT.
    const base = `http://localhost:${new URL(harness.url).port}`;
    const hook = async () => {
      const jwt = await cdsJwt(ehrKey, { aud: `${base}/cds-services/${VIEW}`, iss: ISS });
      const res = await request(harness.url)
        .post(`/cds-services/${VIEW}`)
        .set('Authorization', `Bearer ${jwt}`)
        .send(hookRequest('patient-view', { patient: { emiratesId: '784-1990-0000041-6' } }));
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      return cardsOf(res.body);
    };
    await hook(); // starts the check
    const cards = await until(
      async () => {
        const answer = await hook();
        return answer[0]?.summary.startsWith('Eligible') ? answer : undefined;
      },
      20_000,
      'an Eligible card',
    );
    const link = cards[0]!.links![0]!;
    expect(link.url).toMatch(new RegExp(`^${base}/app/#answer=[\\w-]+$`));
    const id = decodeURIComponent(new URL(link.url).hash.slice('#answer='.length));
    expect(id).not.toBe(eligibleId);

    // The card's origin is PUBLIC_BASE_URL (localhost): the key is kept per origin, so sign in
    // there first; then the link, followed in that tab where the page is open (only the hash
    // changes, a same-document navigation), opens the answer with the key it keeps.
    const origin = new URL(link.url).origin;
    const { page, urls } = await open(origin, { width: 360, height: 780 });
    await openAndSignIn(page, `${origin}/app/`);
    await page.goto(link.url);
    const text = await expectEligibleResult(page);
    expect(text.match(/\beligible\b/gi)?.length).toBe(1);
    expect(apiPaths(urls)).toContain(`/fhir/CoverageEligibilityResponse/${id}`);
    expect(urls.filter((u) => u.includes('$submit'))).toEqual([]);
    expect(new URL(page.url()).hash).toBe('');
    expect(await overflowOf(page)).toBeLessThanOrEqual(0);
  });

  it.each([
    ['a path', '../../x'],
    ['an encoded path', '..%2F..%2Fx'],
    ['markup', '<img src=x onerror=alert(1)>'],
    ['an id too long', 'a'.repeat(65)],
    ['an empty id', ''],
    // Dot segments: the browser would resolve them, to the search of answers or to /fhir/ itself.
    ['the dot segment `.`', '.'],
    ['the dot segment `..`', '..'],
  ])('ignores %s as the id: the normal empty form, no read of an answer', async (_what, id) => {
    const { page, urls } = await open();
    const dialogs: string[] = [];
    page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    await openAndSignIn(page, `${harness.url}/app/#answer=${id}`);
    // The desk's page as after any sign-in: recent checks loaded, no result, nothing in progress.
    await expect
      .poll(() => apiPaths(urls).some((p) => p.startsWith('/fhir/CoverageEligibilityResponse?')))
      .toBe(true);
    await page.waitForLoadState('networkidle');
    expect(await page.getByRole('region', { name: 'Eligibility result' }).isHidden()).toBe(true);
    expect(await page.getByRole('status').innerText()).toBe('');
    expect(await page.getByLabel('Emirates ID or card number').inputValue()).toBe('');
    expect(dialogs).toEqual([]);
    // Every request stayed on this service's API: what sign-in asks of /app/api/ and the search of
    // recent checks, nothing else of /fhir/ (no read of an answer, not /fhir/ itself), nothing outside.
    const paths = apiPaths(urls);
    expect(
      paths.filter((p) => !p.startsWith('/app/api/') && !p.startsWith('/fhir/CoverageEligibilityResponse?')),
    ).toEqual([]);
  });

  it.each([
    ['an unknown id', randomUUID()],
    ['an id of the FHIR id form that is no answer', 'a.b-C'],
  ])(
    '%s: says the answer could not be read, shows no result, reads nothing else',
    async (_what, answerId) => {
      const { page, urls } = await open();
      await openAndSignIn(page, `${harness.url}/app/#answer=${answerId}`);
      await page
        .getByRole('status')
        .filter({ hasText: /^The answer could not be read: / })
        .waitFor();
      await page.waitForLoadState('networkidle');
      expect(await page.getByRole('region', { name: 'Eligibility result' }).isHidden()).toBe(true);
      // The form stays usable.
      expect(await page.getByRole('button', { name: 'Check eligibility' }).isEnabled()).toBe(true);
      const paths = apiPaths(urls);
      expect(paths.filter((p) => !/^\/(fhir|app\/api)\//.test(p))).toEqual([]);
      // One read, of that id under CoverageEligibilityResponse/, and nothing else of the FHIR API but
      // the recent-checks search.
      expect(
        paths.filter((p) => p.startsWith('/fhir/') && !p.startsWith('/fhir/CoverageEligibilityResponse?')),
      ).toEqual([`/fhir/CoverageEligibilityResponse/${answerId}`]);
    },
  );
});
