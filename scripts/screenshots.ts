/**
 * Screenshots of the front-desk page for docs/ and the README, taken with the set-up of the
 * browser tests (test/browser/support.ts: Debian's Chromium through playwright-core) against the
 * real service and the sandbox:
 *   npm run docs:screenshots
 * writes docs/front-desk.png (the README's: the first screen of an eligible answer at 1280 px,
 * with the patient share of a fee), docs/front-desk-result.png (the whole page of that answer and
 * recent checks), docs/front-desk-mobile.png (the same answer 360 px wide),
 * docs/front-desk-not-found.png (member not found), docs/front-desk-operator.png (a refused
 * payer login in the operator view), and, from a recorded answer of a plan shaped like Dubai's
 * Essential Benefits Plan (test/support/fixture-upstream.ts), docs/front-desk-deductible.png (a
 * consultation with a per-visit deductible, checked without a name: the policy holder in recent
 * checks), docs/front-desk-deductible-mobile.png (a lab visit, 360 px) and
 * docs/front-desk-progress.png (the status while the check is on its way).
 */
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { TENANT_A_KEY, startHarness } from '../test/support/harness.js';
import { fixtureUpstream, mappingFixture } from '../test/support/fixture-upstream.js';
import { launchChromium, runCheck, signIn } from '../test/browser/support.js';

const DOCS = fileURLToPath(new URL('../docs/', import.meta.url));
/** The identifier whose finished answer is the recorded EBP-shaped plan. */
const DEDUCTIBLE_PLAN = '784-1990-1234567-6';

async function chooseVisit(page: Page, code: string): Promise<void> {
  const select = page.getByLabel('Visit type');
  const values = await select
    .locator('option')
    .evaluateAll((options) => options.map((o) => (o as HTMLOptionElement).value));
  await select.selectOption(values.find((v) => v.endsWith(`|${code}`)) ?? '');
}

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
  const harness = await startHarness({
    timeScale: 0.01,
    pollIntervalMs: 50,
    overrides: {
      upstream: fixtureUpstream({ [DEDUCTIBLE_PLAN]: mappingFixture('found-eligible-deductible') }),
    },
  });
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

    // A plan shaped like a real one, checked without a name: the deductible in the summary and
    // the amount, the policy holder the portal returned in recent checks.
    await desk.getByRole('tab', { name: 'Front desk' }).click();
    await desk.getByLabel('Patient name (optional)').fill('');
    await runCheck(desk, DEDUCTIBLE_PLAN, 'NAS');
    await estimate(desk, '400');
    await desk.getByRole('region', { name: 'Recent checks' }).getByText('(policy holder)').first().waitFor();
    await desk.screenshot({ path: `${DOCS}front-desk-deductible.png`, fullPage: true });

    await chooseVisit(phone, 'laboratory');
    await runCheck(phone, DEDUCTIBLE_PLAN, 'NAS');
    await estimate(phone, '90');
    await phone.getByRole('region', { name: 'Eligibility result' }).evaluate((e) => e.scrollIntoView());
    await phone.screenshot({ path: `${DOCS}front-desk-deductible-mobile.png` });

    // The status while $submit waits (held 3 s here), as the desk sees it right after the click.
    await phone.route('**/$submit', async (route) => {
      await new Promise((resolve) => setTimeout(resolve, 3000));
      await route.continue();
    });
    await phone.getByLabel('Emirates ID or card number').fill('784-1990-0000001-0');
    await phone.getByLabel('Payer', { exact: true }).fill('DAMAN');
    await phone.getByRole('button', { name: 'Check eligibility' }).click();
    await phone.waitForTimeout(1200);
    await phone.locator('#progress').evaluate((e) => e.scrollIntoView({ block: 'center' }));
    await phone.screenshot({ path: `${DOCS}front-desk-progress.png` });
    console.log(`screenshots written to ${DOCS}`);
  } finally {
    await browser.close();
    await harness.stop();
  }
}

await main();
