/// <reference lib="dom" />
/**
 * The page opened from the EHR (docs/smart-launch.md) in real Chromium: the EHR launch against
 * oidc-provider configured as a SMART EHR with its FHIR server (test/support/smart-ehr.ts), a
 * confidential client (private_key_jwt). The form opens filled from the EHR (Emirates ID, name,
 * payer, visit date), one click checks, and the next launch shows that answer with when it was
 * checked; no EHR token in any response the page received, any URL it asked for, or the log.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { exportJWK, generateKeyPair } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import { EHR_EMIRATES_ID, EHR_PAYER, startFhirServer } from '../support/smart-ehr.js';
import type { SmartEhr } from '../support/smart-ehr.js';
import { launchChromiumOrError } from './support.js';

const CLIENT_ID = 'eligibility-page';
let h: Harness;
let base = '';
let browser: Browser;
let launchError: Error | undefined;
let fhir: Awaited<ReturnType<typeof startFhirServer>>;
let ehr: SmartEhr;
const contexts: BrowserContext[] = [];
/** Every URL the browser asked for, and the text of every answer it received. */
const urls: string[] = [];
const bodies: string[] = [];

beforeAll(async () => {
  const launched = launchChromiumOrError();
  const { privateKey, publicKey } = await generateKeyPair('RS384', { extractable: true });
  const privateJwk = { ...(await exportJWK(privateKey)), kid: 'page-rs', alg: 'RS384' };
  const publicJwk = { ...(await exportJWK(publicKey)), kid: 'page-rs', alg: 'RS384' };
  fhir = await startFhirServer();
  h = await startHarness({
    timeScale: 0.01,
    pollIntervalMs: 50,
    smartLaunch: {
      a: { fhirBaseUrls: [fhir.fhirBase], clientId: CLIENT_ID, clientKeys: { keys: [privateJwk] } },
    },
  });
  base = `http://localhost:${new URL(h.url).port}`;
  ehr = await fhir.attach({
    clientId: CLIENT_ID,
    redirectUri: `${base}/app/launch/callback`,
    clientJwks: { keys: [publicJwk] },
  });
  ({ browser, launchError } = await launched);
}, 60_000);

afterEach(async () => {
  for (const context of contexts.splice(0)) await context.close();
});

afterAll(async () => {
  await browser?.close();
  await h?.stop();
  await fhir?.close();
});

/** A new browser context that may reach the service and the EHR's authorization server only. */
async function newPage(): Promise<Page> {
  if (launchError) throw launchError;
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  contexts.push(context);
  const allowed = new Set([new URL(base).host, new URL(ehr.issuer).host]);
  await context.route('**/*', async (route) => {
    const url = route.request().url();
    urls.push(url);
    if (/^(blob|data):/.test(url) || allowed.has(new URL(url).host)) await route.continue();
    else await route.abort();
  });
  const page = await context.newPage();
  page.on('response', (response) => {
    void response.text().then(
      (text) => bodies.push(text),
      () => undefined,
    );
  });
  return page;
}

/** The EHR opens the page: its launch URL with `iss` and a new launch id. */
async function launchFromEhr(page: Page): Promise<void> {
  const query = new URLSearchParams({ iss: fhir.fhirBase, launch: ehr.newLaunch() });
  await page.goto(`${base}/app/launch?${query}`);
  await page.getByRole('heading', { name: /Opened from the EHR/ }).waitFor({ timeout: 20_000 });
}

describe('the page opened from the EHR', () => {
  it('opens on the EHR patient with the form filled, checks in one click, and shows that answer on the next launch', async () => {
    const page = await newPage();
    await launchFromEhr(page);
    expect(new URL(page.url()).pathname).toBe('/app/');
    expect(await page.getByLabel('Emirates ID or card number').inputValue()).toBe(EHR_EMIRATES_ID);
    expect(await page.getByLabel('Patient name (optional)').inputValue()).toBe('Aisha Al Mansoori');
    expect(await page.getByLabel('Payer', { exact: true }).inputValue()).toBe(EHR_PAYER);
    const visit = new Date(Date.now() + 2 * 86_400_000).toISOString().slice(0, 10);
    expect(await page.getByLabel('Visit date (optional)').inputValue()).toBe(visit);
    const banner = page.getByRole('region', { name: /Opened from the EHR/ });
    expect(await banner.innerText()).toContain('Not checked yet');

    await banner.getByRole('button', { name: 'Check eligibility now' }).click();
    await page.getByRole('status').filter({ hasText: /^Done/ }).waitFor({ timeout: 20_000 });
    const result = page.getByRole('region', { name: 'Eligibility result' });
    expect(await result.innerText()).toMatch(/covered|eligible/i);

    // The EHR opens the page again on the same patient: the answer is there, with when.
    const again = await newPage();
    await launchFromEhr(again);
    const next = again.getByRole('region', { name: /Opened from the EHR/ });
    expect(await next.innerText()).toMatch(/Last checked \d{4}-\d{2}-\d{2} \d{2}:\d{2}/);
    await again.getByRole('region', { name: 'Eligibility result' }).waitFor({ timeout: 10_000 });
    expect(await next.getByRole('button', { name: 'Check again' }).isVisible()).toBe(true);
  });

  it('never lets an EHR token reach the browser (answers, URLs) or the log', () => {
    expect(ehr.issued.length).toBeGreaterThan(0);
    expect(bodies.length).toBeGreaterThan(0);
    const seen = [...urls, ...bodies, ...h.logs].join('\n');
    for (const token of ehr.issued) expect(seen).not.toContain(token);
    // The browser never talked to the EHR's FHIR server: the service read it.
    expect(urls.filter((url) => url.startsWith(fhir.fhirBase))).toEqual([]);
  });
});
