/// <reference lib="dom" />
/**
 * What to collect on the front-desk page (issue 35) in real Chromium, against the running service
 * and the sandbox over real HTTP, with recorded portal answers of plans shaped like real ones for
 * two identifiers (test/support/fixture-upstream.ts): the visit summary and the amount to collect
 * with a per-visit deductible and for maternity, one benefits row per inpatient fact, totals that
 * leave an item without figures out and say so, whose check each recent check is when no name was
 * typed, and the progress shown from the moment a check is sent until its answer.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { fixtureUpstream, mappingFixture } from '../support/fixture-upstream.js';
import type { Harness } from '../support/harness.js';
import { TENANT_A_KEY } from '../support/harness.js';
import type { Watched } from './support.js';
import { closeOpened, openWatched, runCheck, signIn, startWithChromium } from './support.js';

const DEDUCTIBLE_PLAN = '784-1990-1234567-6';
const MATERNITY_PLAN = '784-1985-7654321-3';
let harness: Harness;
let browser: Browser;
const opened: Watched[] = [];
let launchError: Error | undefined;

beforeAll(async () => {
  ({ harness, browser, launchError } = await startWithChromium({
    timeScale: 0.01,
    pollIntervalMs: 50,
    overrides: {
      upstream: fixtureUpstream({
        [DEDUCTIBLE_PLAN]: mappingFixture('found-eligible-deductible'),
        [MATERNITY_PLAN]: mappingFixture('found-eligible-maternity'),
      }),
    },
  }));
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await harness?.stop();
  expect(harness.logs.filter((line) => line.includes(TENANT_A_KEY))).toEqual([]);
});

afterEach(async () => {
  for (const { urls, elsewhere } of await closeOpened(opened)) {
    expect(elsewhere).toEqual([]);
    expect(urls.filter((url) => url.includes(TENANT_A_KEY))).toEqual([]);
  }
});

const open = (viewport?: { width: number; height: number }) =>
  openWatched(opened, browser, launchError, harness.url, viewport);

async function chooseVisit(page: Page, code: string): Promise<void> {
  const select = page.getByLabel('Visit type');
  const value = await select
    .locator('option')
    .evaluateAll(
      (options, c) => options.map((o) => (o as HTMLOptionElement).value).find((v) => v.endsWith(`|${c}`)),
      code,
    );
  await select.selectOption(value ?? '');
}

async function estimateFee(page: Page, fee: string): Promise<string> {
  const result = page.getByRole('region', { name: 'Eligibility result' });
  await result.getByLabel('Fee (AED)').fill(fee);
  await result.getByRole('button', { name: 'Estimate' }).click();
  const share = page.getByRole('region', { name: 'Patient share' });
  await share.getByText(/^(Collect AED|No amount)/).waitFor();
  return share.innerText();
}

describe('what to collect on the page, plans shaped like real ones', () => {
  it.each<[string, string, string, string, string, string]>([
    [
      'the per-visit deductible of a lab visit',
      DEDUCTIBLE_PLAN,
      'laboratory',
      "Laboratory (Outpatient, RN): AED 25 per visit (the portal's deductible, a fixed amount per visit)",
      '90',
      'Collect AED 25.00',
    ],
    [
      '20% up to AED 500 plus the AED 20 deductible of a consultation',
      DEDUCTIBLE_PLAN,
      'consultation',
      "Consultation (Outpatient, RN): AED 20 per visit (the portal's deductible) plus 20% of the fee, the 20% at most AED 500 per visit",
      '400',
      'Collect AED 100.00',
    ],
    [
      'maternity from its benefit, not the Maternity block',
      MATERNITY_PLAN,
      'maternity',
      'Maternity (Outpatient): 10% of the fee, at most AED 500 per visit',
      '300',
      'Collect AED 30.00',
    ],
  ])('%s', async (_name, identifier, visit, sentence, fee, collect) => {
    const { page } = await open({ width: 1280, height: 900 });
    await signIn(page, harness.url, TENANT_A_KEY);
    await chooseVisit(page, visit);
    const text = await runCheck(page, identifier, 'NAS');
    expect(text).toContain(sentence);
    expect(await estimateFee(page, fee)).toContain(collect);
  });

  it('one benefits row per inpatient fact, whichever of the two lists gave it', async () => {
    const { page } = await open({ width: 1280, height: 900 });
    await signIn(page, harness.url, TENANT_A_KEY);
    await runCheck(page, DEDUCTIBLE_PLAN, 'NAS');
    const rows = page
      .getByRole('region', { name: 'Eligibility result' })
      .locator('tr')
      .filter({ hasText: /^\s*Inpatient/ });
    expect(await rows.allInnerTexts()).toEqual([
      expect.stringMatching(/^Inpatient\s+Covered\s+20%\s+1000 \(per admission\)/),
    ]);
  });

  it('totals: an item without figures is left out and named, as the ClaimResponse says', async () => {
    const { page } = await open({ width: 1280, height: 900 });
    await signIn(page, harness.url, TENANT_A_KEY);
    await chooseVisit(page, 'laboratory');
    await runCheck(page, DEDUCTIBLE_PLAN, 'NAS');
    // The page asks about its visit's category; a second item the answer has no figures for
    // (maternity) is added to the same request, as an EHR asking for two fees would.
    await page.route('**/$estimate', async (route) => {
      const body = JSON.parse(route.request().postData() ?? '{}') as { parameter: unknown[] };
      body.parameter.push({
        name: 'item',
        part: [
          {
            name: 'category',
            valueCoding: { system: 'http://terminology.hl7.org/CodeSystem/ex-benefitcategory', code: '69' },
          },
          { name: 'fee', valueMoney: { value: 300, currency: 'AED' } },
        ],
      });
      await route.continue({ postData: JSON.stringify(body) });
    });
    const text = await estimateFee(page, '90');
    expect(text).toContain('Collect AED 25.00, for the items with figures only');
    expect(text).toContain('not counted: item 2 (Maternity, AED 300)');
  });
});

describe('recent checks and progress', () => {
  it.each<[string, string, string, RegExp]>([
    [
      'a found member: the policy holder the portal returned',
      DEDUCTIBLE_PLAN,
      'NAS',
      /AHMED K\. AL MANSOURI \(policy holder\)/,
    ],
    [
      'member not found: the identifier masked to its last digits',
      '784-1990-0000003-6',
      'DAMAN',
      /ID ending 0036/,
    ],
  ])('a check made without a patient name shows %s', async (_name, identifier, payer, who) => {
    const { page } = await open({ width: 360, height: 780 });
    await signIn(page, harness.url, TENANT_A_KEY);
    await runCheck(page, identifier, payer);
    const recent = page.getByRole('region', { name: 'Recent checks' });
    await expect.poll(() => recent.locator('li').first().innerText()).toMatch(who);
    const listed = await recent.innerText();
    // Never the whole identifier, with or without its dashes.
    expect(listed).not.toContain(identifier);
    expect(listed).not.toContain(identifier.replace(/-/g, ''));
  });

  it('shows progress in a role="status" from the moment the check is sent until its answer', async () => {
    const { page } = await open({ width: 1280, height: 900 });
    await signIn(page, harness.url, TENANT_A_KEY);
    // Every text the status takes, from the click on.
    await page.evaluate(() => {
      const seen: string[] = [];
      (window as unknown as { seen: string[] }).seen = seen;
      const status = document.getElementById('progress')!;
      new MutationObserver(() => seen.push(status.textContent ?? '')).observe(status, {
        childList: true,
        characterData: true,
        subtree: true,
      });
    });
    // $submit held for 1.5 s at the page's side: the wait a slow portal makes.
    let sent = 0;
    await page.route('**/$submit', async (route) => {
      sent = Date.now();
      await new Promise((resolve) => setTimeout(resolve, 1500));
      await route.continue();
    });
    await page.getByLabel('Emirates ID or card number').fill('784-1990-0000001-0');
    await page.getByLabel('Payer', { exact: true }).fill('DAMAN');
    await page.getByRole('button', { name: 'Check eligibility' }).click();
    const status = page.getByRole('status');
    await expect.poll(() => sent).toBeGreaterThan(0);
    // While $submit waits: the status says the check is on its way, the seconds move.
    expect(await status.innerText()).toMatch(
      /^Checking eligibility at .*: sent to the payer portal… \(\d+ s\)$/,
    );
    await page.waitForTimeout(1100);
    expect(await status.innerText()).toMatch(/\((1|2) s\)$/);
    await status.filter({ hasText: /^Done/ }).waitFor({ timeout: 20_000 });
    const seen = await page.evaluate(() => (window as unknown as { seen: string[] }).seen);
    expect(seen[0]).toMatch(/^Checking eligibility at /);
    expect(seen.every((text) => text.trim() !== '')).toBe(true);
    expect(seen[seen.length - 1]).toMatch(/^Done/);
  });
});
