/// <reference lib="dom" />
/**
 * The typo guard on the front-desk page, in Chromium against the service and the sandbox over real
 * HTTP (docs/front-desk.md): a mistyped Emirates ID or a placeholder is said under the field as
 * soon as the value is complete, and nothing is sent; a member not found offers `Search all
 * payers` beside `Try the card number`, which runs the same patient across all payers.
 */
import type { Browser } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { emiratesIdProblem } from '../../src/mapping/request/patient.js';
import { TENANT_A_KEY, type Harness } from '../support/harness.js';
import { emiratesId } from '../support/emirates-id.js';
import { closeOpened, openWatched, runCheck, signIn, startWithChromium, type Watched } from './support.js';

let harness: Harness;
let browser: Browser;
let launchError: Error | undefined;
const opened: Watched[] = [];

beforeAll(async () => {
  ({ harness, browser, launchError } = await startWithChromium({ timeScale: 0.01, pollIntervalMs: 50 }));
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await harness?.stop();
});

afterEach(async () => {
  for (const { elsewhere } of await closeOpened(opened)) expect(elsewhere).toEqual([]);
});

/** The page's copy of the guard (app/emirates-id.js, a plain ES module without types). */
const pageGuard = (await import(new URL('../../app/emirates-id.js', import.meta.url).href)) as {
  emiratesIdProblem(value: string): string | null;
};

const submits = (urls: string[]) => urls.filter((url) => url.includes('$submit'));

describe('the Emirates ID field', () => {
  it('the page and the service give the same answer for every ID and every one-digit typo of it', () => {
    for (let n = 0; n < 300; n += 1) {
      const valid = emiratesId(1950 + (n % 70), n * 33_331).replace(/-/g, '');
      for (let at = 3; at < 15; at += 1) {
        const typo = `${valid.slice(0, at)}${(Number(valid[at]) + 1 + (n % 9)) % 10}${valid.slice(at + 1)}`;
        for (const value of [valid, typo])
          expect(pageGuard.emiratesIdProblem(value)).toBe(emiratesIdProblem(value));
      }
    }
    for (const placeholder of [
      '000-0000-0000000-0',
      '111-1111-1111111-1',
      '222-2222-2222222-2',
      '999-9999-9999999-9',
    ])
      expect(pageGuard.emiratesIdProblem(placeholder)).toBe('placeholder');
  });

  it('says a mistyped ID under the field once it is complete, and sends nothing', async () => {
    const { page, urls } = await openWatched(opened, browser, launchError, harness.url);
    await signIn(page, harness.url, TENANT_A_KEY);
    const field = page.getByLabel('Emirates ID or card number');
    const problem = page.locator('#patient-id-problem');
    await field.fill('784-1987-45210');
    expect(await problem.innerText()).toBe('');
    // 784-1987-4521001-7 with two neighbouring digits swapped.
    await field.pressSequentially('10-7');
    await expect.poll(() => problem.innerText()).toMatch(/one digit is probably mistyped/);
    expect(await field.getAttribute('aria-invalid')).toBe('true');
    await page.getByLabel('Payer', { exact: true }).fill('DAMAN');
    await page.getByRole('button', { name: 'Check eligibility' }).click();
    await page.waitForTimeout(300);
    expect(submits(urls)).toEqual([]);
    // Corrected: the message goes, and the check runs.
    await field.fill('784-1987-4521001-7');
    expect(await problem.innerText()).toBe('');
    await page.getByRole('button', { name: 'Check eligibility' }).click();
    await page.getByRole('status').filter({ hasText: /^Done/ }).waitFor({ timeout: 20_000 });
    expect(submits(urls)).toHaveLength(1);
  });

  it('says a placeholder is no ID to check, and points to the card number', async () => {
    const { page, urls } = await openWatched(opened, browser, launchError, harness.url, {
      width: 360,
      height: 800,
    });
    await signIn(page, harness.url, TENANT_A_KEY);
    await page.getByLabel('Emirates ID or card number').fill('111-1111-1111111-1');
    await expect
      .poll(() => page.locator('#patient-id-problem').innerText())
      .toMatch(/placeholder.*insurance card number/);
    await page.getByLabel('Payer', { exact: true }).fill('DAMAN');
    await page.getByRole('button', { name: 'Check eligibility' }).click();
    await page.waitForTimeout(300);
    expect(submits(urls)).toEqual([]);
  });
});

describe('a member not found', () => {
  it('offers Search all payers beside Try the card number, which searches all payers for the same patient', async () => {
    const { page } = await openWatched(opened, browser, launchError, harness.url);
    await signIn(page, harness.url, TENANT_A_KEY);
    const sent: unknown[] = [];
    page.on('request', (req) => {
      if (req.url().includes('$submit')) sent.push(req.postDataJSON());
    });
    await runCheck(page, '784-1990-0000003-6', 'DAMAN');
    const result = page.getByRole('region', { name: 'Eligibility result' });
    const buttons = await result.getByRole('button').allInnerTexts();
    expect(buttons).toEqual(expect.arrayContaining(['Try the card number', 'Search all payers']));
    await result.getByRole('button', { name: 'Search all payers' }).click();
    await expect.poll(() => sent.length).toBe(2);
    const searchAll = sent[1] as { purpose: string[]; contained: { identifier?: { value: string }[] }[] };
    expect(searchAll.purpose).toEqual(['discovery']);
    expect(searchAll.contained[0]?.identifier?.[0]?.value).toBe('784-1990-0000003-6');
    await page.getByRole('status').filter({ hasText: /^Done/ }).waitFor({ timeout: 20_000 });
  });
});
