/**
 * Screenshots of the front-desk page for docs/ and the README, taken with the set-up of the
 * browser tests (test/browser/support.ts: Debian's Chromium through playwright-core) against the
 * real service and the sandbox:
 *   npm run docs:screenshots
 * writes docs/front-desk.png (the README's: the first screen of an eligible answer at 1280 px,
 * with the patient share of a fee), docs/front-desk-result.png (the whole page of that answer and
 * recent checks), docs/front-desk-mobile.png (the same answer 360 px wide),
 * docs/front-desk-not-found.png (member not found) and docs/front-desk-operator.png (a refused
 * payer login in the operator view).
 */
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { TENANT_A_KEY, startHarness } from '../test/support/harness.js';
import { launchChromium, runCheck, signIn } from '../test/browser/support.js';

const DOCS = fileURLToPath(new URL('../docs/', import.meta.url));

/** Types a fee and presses Enter, as the desk does, and waits for the amount to collect. */
async function estimate(page: Page, fee: string): Promise<void> {
  await page.getByLabel('Fee (AED)').fill(fee);
  await page.getByLabel('Fee (AED)').press('Enter');
  await page
    .getByRole('region', { name: 'Patient share' })
    .filter({ hasText: /Collect AED|No amount|not/ })
    .waitFor();
}

async function main(): Promise<void> {
  const harness = await startHarness({ timeScale: 0.01, pollIntervalMs: 50 });
  const browser = await launchChromium();
  try {
    const desk = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    await signIn(desk, harness.url, TENANT_A_KEY);
    await desk.getByLabel('Patient name (optional)').fill('مريم الهاشمي');
    await runCheck(desk, '784-1990-0000002-8', 'NAS');
    await desk.getByLabel('Patient name (optional)').fill('Layla Mansour');
    await runCheck(desk, '784-1990-0000009-3', 'NEURON');
    await desk.getByLabel('Patient name (optional)').fill('Omar Haddad');
    await runCheck(desk, '784-1990-0000001-0', 'DAMAN');
    await estimate(desk, '300');
    // The first screen a receptionist sees once the answer is in: the result at the top.
    await desk.getByRole('region', { name: 'Eligibility result' }).evaluate((e) => e.scrollIntoView());
    await desk.screenshot({ path: `${DOCS}front-desk.png` });
    await desk.getByRole('region', { name: 'Recent checks' }).locator('li').nth(2).waitFor();
    await desk.screenshot({ path: `${DOCS}front-desk-result.png`, fullPage: true });

    const phone = await browser.newPage({ viewport: { width: 360, height: 780 } });
    await signIn(phone, harness.url, TENANT_A_KEY);
    await runCheck(phone, '784-1990-0000001-0', 'DAMAN');
    await estimate(phone, '300');
    await phone.getByRole('region', { name: 'Eligibility result' }).evaluate((e) => e.scrollIntoView());
    await phone.screenshot({ path: `${DOCS}front-desk-mobile.png` });

    await runCheck(desk, '784-1990-0000003-6', 'DAMAN');
    await desk.getByRole('region', { name: 'Eligibility result' }).evaluate((e) => e.scrollIntoView());
    await desk.screenshot({ path: `${DOCS}front-desk-not-found.png` });

    await runCheck(desk, '784-1990-0000004-4', 'AXA');
    await desk.getByRole('tab', { name: 'Operator' }).click();
    await desk
      .getByRole('region', { name: 'Credential guards' })
      .getByRole('button', { name: /^Reset/ })
      .waitFor();
    await desk.screenshot({ path: `${DOCS}front-desk-operator.png` });
    console.log(`screenshots written to ${DOCS}`);
  } finally {
    await browser.close();
    await harness.stop();
  }
}

await main();
