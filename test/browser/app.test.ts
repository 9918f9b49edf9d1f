/// <reference lib="dom" />
/**
 * The front-desk page /app/ in a real browser (Debian's Chromium through playwright-core) against
 * the running service and the sandbox upstream over real HTTP: sign in, an eligible and a
 * not-eligible check to their result, a refused payer login and its reset in the operator view,
 * keyboard only, 360 px wide, no request to another host, and the key in no URL and no log line.
 * Also every narrative the mapper writes goes through Chromium's XML parser (FHIR XHTML).
 */
import { readFileSync, readdirSync, statSync } from 'node:fs';
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CANONICAL_BASE } from '../../src/fhir/canonical.js';
import { mapEnvelope } from '../../src/mapping/response/index.js';
import { envelopeSchema } from '../../src/upstream/contract.js';
import type { Harness } from '../support/harness.js';
import { TENANT_A_KEY } from '../support/harness.js';
import { NARRATIVE_ELEMENTS } from '../support/narrative.js';
import type { Watched } from './support.js';
import { closeOpened, openWatched, runCheck, signIn, startWithChromium } from './support.js';

let harness: Harness;
let browser: Browser;
const opened: Watched[] = [];

/** Why Chromium did not start: every test then fails with it (never a skip). */
let launchError: Error | undefined;

beforeAll(async () => {
  ({ harness, browser, launchError } = await startWithChromium({ timeScale: 0.01, pollIntervalMs: 50 }));
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await harness?.stop();
  // The key went into no log line of the service.
  expect(harness.logs.length).toBeGreaterThan(0);
  expect(harness.logs.filter((line) => line.includes(TENANT_A_KEY))).toEqual([]);
});

const open = (viewport?: { width: number; height: number }) =>
  openWatched(opened, browser, launchError, harness.url, viewport);

afterEach(async () => {
  for (const { urls, elsewhere } of await closeOpened(opened)) {
    expect(urls.length).toBeGreaterThan(0);
    // Nothing from another host, and the key in no URL the page asked for.
    expect(elsewhere).toEqual([]);
    expect(
      urls.filter((url) => url.includes(TENANT_A_KEY) || url.includes(encodeURIComponent(TENANT_A_KEY))),
    ).toEqual([]);
  }
});

describe('the front-desk page', () => {
  it('signs in with the key, refusing a wrong one, and keeps the key out of the URL', async () => {
    const { page } = await open();
    await page.goto(`${harness.url}/app/`);
    await page.getByLabel('API key').fill('not-a-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').innerText()).toContain('not valid');
    await page.getByLabel('API key').fill(TENANT_A_KEY);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByLabel('Emirates ID or card number').waitFor();
    expect(await page.locator('#payer-list option').count()).toBeGreaterThan(3);
    expect(await page.getByLabel('Visit type').locator('option').count()).toBeGreaterThan(1);
    expect(page.url()).not.toContain(TENANT_A_KEY);
    // The page's own policy: scripts and requests from this origin only.
    const response = await page.request.get(`${harness.url}/app/`);
    expect(response.headers()['content-security-policy']).toContain("script-src 'self'");
  });

  it('sends the key nowhere when the script has not run: Enter in the sign-in form submits no field', async () => {
    if (launchError) throw launchError;
    // Scripts off: what a browser does with the forms before main.js has loaded (or when it fails).
    const context = await browser.newContext({ javaScriptEnabled: false });
    try {
      const page = await context.newPage();
      const sent: string[] = [];
      page.on('request', (req) => sent.push(`${req.method()} ${req.url()} ${req.postData() ?? ''}`));
      await page.goto(`${harness.url}/app/`);
      await page.locator('#api-key').fill(TENANT_A_KEY);
      await Promise.all([page.waitForEvent('requestfinished'), page.locator('#api-key').press('Enter')]);
      // The form was submitted natively (a POST of no field), and nothing carried the key.
      expect(sent.some((line) => line.startsWith('POST '))).toBe(true);
      expect(page.url()).not.toContain(TENANT_A_KEY);
      expect(sent.filter((line) => line.includes(TENANT_A_KEY) || line.includes('api-key'))).toEqual([]);
    } finally {
      await context.close();
    }
  });

  it('runs a found-eligible check to its result: narrative, benefits table, documents; then checks again', async () => {
    const { page } = await open();
    await signIn(page, harness.url, TENANT_A_KEY);
    const text = await runCheck(page, '784-1990-0000001-0');
    expect(text).toMatch(/^Eligibility result\s+Eligible at Daman\b/);
    expect(text).toContain('A GP referral is required for specialist visits');
    expect(text).toMatch(/Checked: \d{4}-\d{2}-\d{2} \d{2}:\d{2} Dubai time/);
    const result = page.getByRole('region', { name: 'Eligibility result' });
    expect(await result.locator('table tbody tr').count()).toBeGreaterThan(1);
    expect(await result.getByRole('button', { name: /^Open / }).count()).toBeGreaterThan(0);
    // A document: fetched with the key through the service's stable link, saved from a blob: URL.
    const download = page.waitForEvent('download');
    const fetched = page.waitForResponse((r) => r.url().includes('/fhir/Binary/'));
    await result
      .getByRole('button', { name: /^Open / })
      .first()
      .click();
    const [saved, binary] = await Promise.all([download, fetched]);
    expect(binary.status()).toBe(200);
    expect(binary.request().headers().authorization).toBe(`Bearer ${TENANT_A_KEY}`);
    expect(saved.url()).toMatch(/^blob:/);
    expect(statSync(await saved.path()).size).toBeGreaterThan(0);
    expect(saved.suggestedFilename().length).toBeGreaterThan(0);
    // Recent checks lists it.
    const recent = page.getByRole('region', { name: 'Recent checks' });
    await expect.poll(() => recent.innerText()).toContain('Eligible');

    // Check again: a new check (a new identifier) that bypasses reuse with Cache-Control: no-cache.
    const sent = page.waitForRequest((r) => r.url().endsWith('/$submit') && r.method() === 'POST');
    await page.getByRole('button', { name: 'Check again' }).click();
    const again = await sent;
    expect(again.headers()['cache-control']).toBe('no-cache');
    await page.getByRole('status').filter({ hasText: /^Done/ }).waitFor({ timeout: 20_000 });
    const bodies = harness.server.store.search('clinic-a', {}, { count: 100, offset: 0 });
    const ids = (await bodies).checks.map((c) => c.idempotencyKey);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('says until when the screenshot is kept, and opens a past answer of the patient with its proof', async () => {
    const { page } = await open();
    await signIn(page, harness.url, TENANT_A_KEY);
    await runCheck(page, '784-1990-0000001-0');
    const result = page.getByRole('region', { name: 'Eligibility result' });
    // Kept just after the answer: the page asks again and shows it beside the screenshot.
    const keptUntil = new Date(Date.now() + 730 * 86_400_000).toISOString().slice(0, 10);
    await expect
      .poll(() => result.locator('.documents li').filter({ hasText: 'screenshot' }).first().innerText(), {
        timeout: 10_000,
      })
      .toMatch(new RegExp(`kept until ${keptUntil.slice(0, 7)}`));
    // The patient's past answers, found by the identifier, open with their proof.
    const recent = page.getByRole('region', { name: 'Recent checks' });
    await recent.getByLabel('Patient identifier').fill('784-1990-0000001-0');
    await recent.getByRole('button', { name: 'Search' }).click();
    await expect.poll(() => recent.locator('li').count()).toBeGreaterThan(0);
    await recent.getByRole('button', { name: 'Show' }).first().click();
    await expect
      .poll(() => result.locator('.documents').innerText(), { timeout: 10_000 })
      .toContain('kept until');
  });

  it('shows live progress while the check is queued, reading the CER with If-None-Match', async () => {
    const { page } = await open();
    await signIn(page, harness.url, TENANT_A_KEY);
    const notModified = page.waitForResponse(
      (r) => r.status() === 304 && r.request().headers()['if-none-match'] !== undefined,
      { timeout: 10_000 },
    );
    // The sandbox's slow scenario stays at the portal for a while.
    await page.getByLabel('Emirates ID or card number').fill('784-1990-0000012-7');
    await page.getByRole('button', { name: 'Check eligibility' }).click();
    await page
      .getByRole('status')
      .filter({ hasText: /^Still checking since \d{4}-\d{2}-\d{2} / })
      .waitFor();
    const answer = await notModified;
    expect(answer.url()).toMatch(/\/fhir\/CoverageEligibilityResponse\/[^/?]+$/);
    expect(await page.getByRole('region', { name: 'Eligibility result' }).isHidden()).toBe(true);
  });

  it('searches all payers: one section per payer that found the member', async () => {
    const { page } = await open();
    await signIn(page, harness.url, TENANT_A_KEY);
    const text = await runCheck(page, '784-1990-0000031-7', 'ALL');
    expect(text).toMatch(/^Eligibility result\s+Eligible at 2 payers\b/);
    expect(text.match(/Payer: /g)?.length).toBe(2);
  });

  it('shows a not-eligible answer with the payer reason, and filters recent checks by outcome', async () => {
    const { page } = await open();
    await signIn(page, harness.url, TENANT_A_KEY);
    const text = await runCheck(page, '784-1990-0000002-8');
    expect(text).toMatch(/^Eligibility result\s+Not eligible\b/);
    const recent = page.getByRole('region', { name: 'Recent checks' });
    await recent.getByLabel('Outcome').selectOption('complete');
    await expect.poll(() => recent.innerText()).toContain('Not eligible');
    await recent.getByLabel('Outcome').selectOption('error');
    await expect
      .poll(() => recent.locator('li').allInnerTexts())
      .not.toContainEqual(expect.stringContaining('Not eligible'));
  });

  it('a refused payer login: no determination, the guard in the operator view, and its reset', async () => {
    const { page } = await open();
    await signIn(page, harness.url, TENANT_A_KEY);
    const text = await runCheck(page, '784-1990-0000004-4', 'AXA');
    expect(text).toMatch(/^Eligibility result\s+No determination\b/);
    await page.getByRole('tab', { name: 'Operator' }).click();
    const guards = page.getByRole('region', { name: 'Credential guards' });
    await expect.poll(() => guards.innerText()).toContain('AXA');
    expect(await page.getByRole('region', { name: 'Queues' }).innerText()).toContain('clinic-a');
    await page.getByRole('region', { name: 'Stuck checks' }).waitFor();
    expect(await harness.server.store.getGuard('clinic-a', 'AXA')).not.toBeNull();
    await guards.getByRole('button', { name: /^Reset/ }).click();
    await expect.poll(() => guards.innerText()).toContain('No open guards');
    expect(await harness.server.store.getGuard('clinic-a', 'AXA')).toBeNull();
  });

  it('can be used with the keyboard alone: sign in, a check to its result, the operator tab', async () => {
    const { page } = await open();
    await page.goto(`${harness.url}/app/`);
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('api-key');
    await page.keyboard.type(TENANT_A_KEY);
    await page.keyboard.press('Enter');
    await page.getByLabel('Emirates ID or card number').waitFor();
    // Signing in puts the cursor in the first field of the form.
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('patient-id');
    await page.keyboard.type('784-1990-0000009-3');
    await page.keyboard.press('Tab'); // Patient name (optional)
    await page.keyboard.type('مريم الهاشمي');
    await page.keyboard.press('Tab'); // Payer (the most recent payer is filled in)
    await page.keyboard.press('Control+A');
    await page.keyboard.type('NEURON');
    await page.keyboard.press('Tab'); // Visit type
    await page.keyboard.press('Tab'); // Check eligibility
    expect(await page.evaluate(() => document.activeElement?.textContent?.trim())).toBe('Check eligibility');
    await page.keyboard.press('Enter');
    await page.getByRole('status').filter({ hasText: /^Done/ }).waitFor({ timeout: 20_000 });
    const result = await page.getByRole('region', { name: 'Eligibility result' }).innerText();
    expect(result).toMatch(/^Eligibility result\s+Eligible at Neuron on card 2 of 3\b/);
    expect(result).toContain('Card 2 of 3 shown');
    // The Arabic name shows in recent checks, isolated right-to-left inside this left-to-right page.
    const name = page
      .getByRole('region', { name: 'Recent checks' })
      .locator('bdi', { hasText: 'مريم الهاشمي' });
    await name.first().waitFor();
    expect(await name.first().evaluate((e) => getComputedStyle(e).direction)).toBe('rtl');
    // The tabs: arrow keys move between them.
    await page.getByRole('tab', { name: 'Front desk' }).focus();
    await page.keyboard.press('ArrowRight');
    expect(await page.evaluate(() => document.activeElement?.textContent?.trim())).toBe('Operator');
    await page.getByRole('region', { name: 'Queues' }).waitFor();
  });

  it('has readable contrast: every visible text at least 4.5:1 against its background (WCAG 2.2 AA)', async () => {
    const { page } = await open();
    await signIn(page, harness.url, TENANT_A_KEY);
    await runCheck(page, '784-1990-0000002-8');
    const lowest = () =>
      page.evaluate(() => {
        const rgb = (color: string) => (color.match(/[\d.]+/g) ?? []).map(Number);
        const luminance = ([r = 0, g = 0, b = 0]: number[]) => {
          const [R, G, B] = [r, g, b].map((v) => {
            const c = v / 255;
            return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
          });
          return 0.2126 * R! + 0.7152 * G! + 0.0722 * B!;
        };
        const background = (element: Element | null): number[] => {
          for (let e = element; e; e = e.parentElement) {
            const [r, g, b, a = 1] = rgb(getComputedStyle(e).backgroundColor);
            if (a > 0 && r !== undefined) return [r, g ?? 0, b ?? 0];
          }
          return [255, 255, 255];
        };
        const found: { text: string; ratio: number }[] = [];
        const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
          const element = node.parentElement;
          if (!element || !node.textContent?.trim() || element.getClientRects().length === 0) continue;
          if (element.closest('[hidden], .visually-hidden')) continue;
          const fg = luminance(rgb(getComputedStyle(element).color));
          const bg = luminance(background(element));
          const ratio = (Math.max(fg, bg) + 0.05) / (Math.min(fg, bg) + 0.05);
          found.push({ text: node.textContent.trim().slice(0, 30), ratio });
        }
        return found.sort((a, b) => a.ratio - b.ratio)[0];
      });
    expect((await lowest())?.ratio).toBeGreaterThanOrEqual(4.5);
    await page.getByRole('tab', { name: 'Operator' }).click();
    await page.getByRole('region', { name: 'Queues' }).locator('table').waitFor();
    expect((await lowest())?.ratio).toBeGreaterThanOrEqual(4.5);
  });

  it('fits 360 px wide with no horizontal scroll, result and operator view included', async () => {
    const { page } = await open({ width: 360, height: 780 });
    await signIn(page, harness.url, TENANT_A_KEY);
    await runCheck(page, '784-1990-0000001-0');
    const overflow = () =>
      page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
    expect(await overflow()).toBeLessThanOrEqual(0);
    await page.getByRole('tab', { name: 'Operator' }).click();
    await page.getByRole('region', { name: 'Queues' }).locator('table').waitFor();
    expect(await overflow()).toBeLessThanOrEqual(0);
  });
});

/** The page's horizontal overflow in px (0 or less: nothing to scroll sideways). */
const overflowOf = (page: Page) =>
  page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);

/**
 * Every benefits-table cell with text that is not fully inside the window or is cut by its own
 * box (a figure a receptionist could not read without scrolling); [] when all can be read.
 */
const cutCells = (page: Page) =>
  page.evaluate(() =>
    Array.from(document.querySelectorAll('table.benefits td'))
      .filter((td) => td.textContent?.trim() && td.getClientRects().length > 0)
      .filter((td) => {
        const box = td.getBoundingClientRect();
        return box.left < 0 || box.right > window.innerWidth || td.scrollWidth > td.clientWidth + 1;
      })
      .map((td) => td.textContent?.trim() ?? ''),
  );

describe('what to collect: the result a receptionist reads', () => {
  for (const width of [1280, 360]) {
    it(`at ${width} px: an eligible member says so once, with the claim ids, the table, each message and document once, every figure readable`, async () => {
      const { page } = await open({ width, height: 900 });
      await signIn(page, harness.url, TENANT_A_KEY);
      const text = await runCheck(page, '784-1990-0000001-0', 'DAMAN');
      const result = page.getByRole('region', { name: 'Eligibility result' });
      expect(text).toMatch(/^Eligibility result\s+Eligible at Daman\b/);
      // The outcome once: no `Eligible: yes`, no second headline.
      expect(text.match(/\beligible\b/gi)?.length).toBe(1);
      expect(text).toMatch(/Member id\s+DAMAN-/);
      // The visit summary first, then the ids the claim needs, then the tables per portal block.
      const at = (words: string) => text.indexOf(words);
      expect(at('What to collect')).toBeGreaterThan(0);
      expect(text).toContain('Consultation (Outpatient, GN+): 20% of the fee, at most AED 50 per visit');
      expect(at('What to collect')).toBeLessThan(at('Member id'));
      expect(at('Member id')).toBeLessThan(at('Outpatient benefits'));
      expect(at('Outpatient benefits')).toBeLessThan(at('Maternity benefits'));
      // A maximum the portal gives as 0 never reads as a figure: `none given by the portal`.
      const maxima = await result
        .locator('table.benefits td[data-label="Copay maximum"]')
        .evaluateAll((cells) => cells.map((c) => c.textContent?.trim()));
      expect(maxima).toContain('none given by the portal');
      expect(maxima).not.toContain('0');
      // A structured note of the portal in words, never raw JSON.
      expect(text).toContain('Limits: annual limit AED 15,000');
      expect(text).not.toMatch(/[{}]/);
      expect(text).toMatch(/Eligibility id\s+ELG-/);
      expect(await result.getByLabel('Fee (AED)').isVisible()).toBe(true);
      expect(await result.locator('table.benefits tbody tr').count()).toBeGreaterThan(1);
      for (const message of ['Prior approval request PA-2291', 'Claim form must be signed']) {
        expect(text.split(message).length - 1, message).toBe(1);
      }
      const buttons = await result.getByRole('button', { name: /^Open / }).allInnerTexts();
      expect(buttons).toEqual(
        expect.arrayContaining(['Open Payer portal screenshot', 'Open Eligibility Letter']),
      );
      expect(new Set(buttons).size).toBe(buttons.length);
      expect(await overflowOf(page)).toBeLessThanOrEqual(0);
      expect(await cutCells(page)).toEqual([]);
      // The yearly copay cap in full, nowhere cut off.
      const cap = result.locator('table.benefits td', { hasText: 'AED 500 per year' }).first();
      const box = await cap.boundingBox();
      expect(box && box.x >= 0 && box.x + box.width <= width).toBe(true);
    });
  }

  it('estimates the patient share by keyboard alone: Fee (AED), Estimate, `Collect AED <amount>` and the sentence it came from', async () => {
    const { page } = await open({ width: 360, height: 780 });
    await signIn(page, harness.url, TENANT_A_KEY);
    await runCheck(page, '784-1990-0000001-0', 'DAMAN');
    // From the button just used, Tab reaches the fee (the result's first field) without the mouse.
    await page.getByRole('button', { name: 'Check eligibility' }).focus();
    for (let i = 0; i < 20 && (await page.evaluate(() => document.activeElement?.id)) !== 'fee'; i++) {
      await page.keyboard.press('Tab');
    }
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('fee');
    await page.keyboard.type('300');
    await page.keyboard.press('Tab');
    expect(await page.evaluate(() => document.activeElement?.textContent?.trim())).toBe('Estimate');
    const asked = page.waitForRequest((r) => r.url().endsWith('/$estimate'));
    await page.keyboard.press('Enter');
    const body = JSON.parse((await asked).postData() ?? '{}');
    expect(body.parameter[0].part).toEqual([
      {
        name: 'category',
        valueCoding: { system: expect.stringMatching(/service-category$/), code: 'consultation' },
      },
      { name: 'fee', valueMoney: { value: 300, currency: 'AED' } },
    ]);
    const share = page.getByRole('region', { name: 'Patient share' });
    await share.filter({ hasText: 'Collect AED' }).waitFor();
    const text = await share.innerText();
    // 20% of 300 is 60, at most AED 50 per visit: collect 50.
    expect(text).toMatch(/^Collect AED 50\.00\b/);
    expect(text).toContain('Consultation (Outpatient, GN+): 20% of the fee, at most AED 50 per visit');
    expect(await overflowOf(page)).toBeLessThanOrEqual(0);
    // A fee the desk mistyped is refused on the page, and nothing is asked.
    await page.getByLabel('Fee (AED)').fill('3OO');
    await page.getByLabel('Fee (AED)').press('Enter');
    await share.filter({ hasText: 'Enter the fee in AED' }).waitFor();
  });

  it('a not-eligible member: why and what to do, no table of `Covered`, no fee, the screenshot', async () => {
    const { page } = await open({ width: 360, height: 780 });
    await signIn(page, harness.url, TENANT_A_KEY);
    const text = await runCheck(page, '784-1990-0000002-8', 'NAS');
    const result = page.getByRole('region', { name: 'Eligibility result' });
    expect(text).toMatch(/^Eligibility result\s+Not eligible at NAS\b/);
    expect(text).toContain('Policy lapsed');
    expect(text).toContain('Next: do not bill this payer');
    expect(await result.locator('table').count()).toBe(0);
    expect(text).not.toContain('Covered');
    expect(await result.getByLabel('Fee (AED)').isVisible()).toBe(false);
    expect(await result.getByRole('button', { name: 'Open Payer portal screenshot' }).count()).toBe(1);
    expect(await overflowOf(page)).toBeLessThanOrEqual(0);
  });

  it('member not found: what happened and what to do (the card number), the screenshot, no letters or forms', async () => {
    const { page } = await open({ width: 1280, height: 900 });
    await signIn(page, harness.url, TENANT_A_KEY);
    const text = await runCheck(page, '784-1990-0000003-6', 'DAMAN');
    const result = page.getByRole('region', { name: 'Eligibility result' });
    expect(text).toMatch(/^Eligibility result\s+Member not found at Daman\b/);
    expect(text).not.toContain('No determination');
    expect(text).toContain('check again with the insurance card number');
    const buttons = await result.getByRole('button', { name: /^Open / }).allInnerTexts();
    expect(buttons).toEqual(['Open Payer portal screenshot']);
    expect(await result.getByLabel('Fee (AED)').isVisible()).toBe(false);
    expect(await result.locator('table').count()).toBe(0);
    // `Try the card number` puts the cursor in the identifier field, emptied for the card number.
    await result.getByRole('button', { name: 'Try the card number' }).click();
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('patient-id');
    expect(await page.getByLabel('Emirates ID or card number').inputValue()).toBe('');
    expect(await overflowOf(page)).toBeLessThanOrEqual(0);
  });

  for (const width of [1280, 360]) {
    it(`at ${width} px: a multi-card member: which card is shown and what to do about the others`, async () => {
      const { page } = await open({ width, height: 900 });
      await signIn(page, harness.url, TENANT_A_KEY);
      const text = await runCheck(page, '784-1990-0000009-3', 'NEURON');
      expect(text).toMatch(/^Eligibility result\s+Eligible at Neuron on card 2 of 3\b/);
      expect(text).toMatch(/Card 2 of 3 shown \(\S+\): package \S+/);
      expect(text).toContain(
        'The other 2 are not shown: to check one, run a new check with its card number.',
      );
      expect(await overflowOf(page)).toBeLessThanOrEqual(0);
      expect(await cutCells(page)).toEqual([]);
    });
  }

  it('isolates user text: a name with U+202E does not show reversed, a 60,000-character name does not widen the page', async () => {
    const { page } = await open({ width: 1280, height: 900 });
    await signIn(page, harness.url, TENANT_A_KEY);
    await page.getByLabel('Patient name (optional)').fill('\u202EOmar Haddad');
    await runCheck(page, '784-1990-0000021-8', 'DAMAN');
    const recent = page.getByRole('region', { name: 'Recent checks' });
    const name = recent.locator('bdi', { hasText: 'Omar Haddad' }).first();
    await name.waitFor();
    expect(await name.evaluate((e) => e.textContent)).toBe('Omar Haddad');
    // Rendered left to right as typed: the `O` is left of the `d`.
    const [first, last] = await name.evaluate((e) => {
      const range = document.createRange();
      const text = e.firstChild as Text;
      range.setStart(text, 0);
      range.setEnd(text, 1);
      const o = range.getBoundingClientRect().left;
      range.setStart(text, text.length - 1);
      range.setEnd(text, text.length);
      return [o, range.getBoundingClientRect().left];
    });
    expect(first).toBeLessThan(last);

    await page.getByLabel('Patient name (optional)').fill('W'.repeat(60_000));
    await runCheck(page, '784-1990-0000022-6', 'DAMAN');
    await recent.locator('bdi', { hasText: 'WWWW' }).first().waitFor();
    expect(await overflowOf(page)).toBeLessThanOrEqual(0);
    await page.setViewportSize({ width: 360, height: 780 });
    expect(await overflowOf(page)).toBeLessThanOrEqual(0);
  });

  it('the form: any payer code with known and recent payers as suggestions, a short list of visit types, Consultation first', async () => {
    const { page } = await open({ width: 1280, height: 900 });
    await signIn(page, harness.url, TENANT_A_KEY);
    const suggested = await page
      .locator('#payer-list option')
      .evaluateAll((options) => options.map((o) => (o as HTMLOptionElement).value));
    // Every payer the sandbox knows, each once, and the search across all payers.
    for (const code of ['DAMAN', 'WATANIA', 'INAYAH', 'LIFELINE', 'ALBUHAIRA', 'MSH', 'ALL'])
      expect(suggested, code).toContain(code);
    expect(new Set(suggested).size).toBe(suggested.length);
    const visitTypes = await page.getByLabel('Visit type').locator('option').allInnerTexts();
    expect(visitTypes[0]).toBe('Consultation');
    expect(await page.getByLabel('Visit type').inputValue()).toMatch(/\|consultation$/);
    expect(visitTypes.length).toBeLessThanOrEqual(12);
    expect(new Set(visitTypes).size).toBe(visitTypes.length);
    // A code the list does not name goes through as typed (upper-cased), and becomes a recent payer.
    await page.getByLabel('Payer', { exact: true }).fill('zzpay');
    expect(await page.locator('#payer-name').innerText()).toContain('does not name');
    const sent = page.waitForRequest((r) => r.url().endsWith('/$submit'));
    await page.getByLabel('Emirates ID or card number').fill('784-1990-0000023-4');
    await page.getByRole('button', { name: 'Check eligibility' }).click();
    expect((await sent).postData()).toContain('"value":"ZZPAY"');
    await page.getByRole('status').filter({ hasText: /^Done/ }).waitFor({ timeout: 20_000 });
    await page.reload();
    await page.getByLabel('Emirates ID or card number').waitFor();
    expect(await page.getByLabel('Payer', { exact: true }).inputValue()).toBe('ZZPAY');
    expect(await page.locator('#payer-list option').first().getAttribute('value')).toBe('ZZPAY');
  });
});

describe('the narrative as XHTML', () => {
  it('every narrative the mapper writes is well-formed XHTML with FHIR narrative elements only (Chromium XML parser)', async () => {
    const dir = new URL('../fixtures/mapping/', import.meta.url);
    const divs = readdirSync(dir)
      .filter((f) => f.endsWith('.json'))
      .map((file) => {
        const envelope = envelopeSchema.parse(JSON.parse(readFileSync(new URL(file, dir), 'utf8')));
        const isSearchAll = file.startsWith('search-all');
        const cer = mapEnvelope(envelope, {
          checkId: 'c-1',
          patient: { reference: 'Patient/p' },
          insurer: isSearchAll
            ? { display: 'All payers' }
            : {
                identifier: { system: `${CANONICAL_BASE}/payer-code`, value: 'DAMAN' },
                display: 'Daman <&> "D"',
              },
          request: {
            resourceType: 'CoverageEligibilityRequest',
            status: 'active',
            purpose: isSearchAll ? ['discovery'] : ['benefits'],
            patient: { reference: 'Patient/p' },
            created: '2026-11-22',
            insurer: { display: 'Daman' },
          },
          isSearchAll,
          baseUrl: 'https://adapter.example.org',
          now: '2026-11-22T10:00:00.000Z',
        });
        return { file, div: cer.text?.div ?? '' };
      });
    expect(divs.length).toBeGreaterThan(10);
    if (launchError) throw launchError;
    const page = await browser.newPage();
    const input = { list: divs, elements: [...NARRATIVE_ELEMENTS] };
    const problems = await page.evaluate(({ list, elements }) => {
      // https://hl7.org/fhir/R4/narrative.html: txt-1 (basic XHTML only: no script, style, form,
      // event attribute), txt-2 (non-whitespace content).
      const allowed = new Set(elements);
      const out: string[] = [];
      for (const { file, div } of list) {
        const doc = new DOMParser().parseFromString(div, 'application/xhtml+xml');
        if (doc.getElementsByTagName('parsererror').length > 0) out.push(`${file}: not well-formed`);
        const root = doc.documentElement;
        if (root.localName !== 'div' || root.namespaceURI !== 'http://www.w3.org/1999/xhtml')
          out.push(`${file}: root is not an XHTML div`);
        for (const element of Array.from(root.getElementsByTagName('*'))) {
          if (!allowed.has(element.localName)) out.push(`${file}: <${element.localName}>`);
          for (const attribute of Array.from(element.attributes)) {
            if (attribute.name !== 'href') out.push(`${file}: attribute ${attribute.name}`);
          }
        }
        if ((root.textContent ?? '').trim() === '') out.push(`${file}: empty`);
      }
      return out;
    }, input);
    await page.close();
    expect(problems).toEqual([]);
  });
});
