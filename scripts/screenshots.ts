/**
 * Screenshots of the front-desk page for docs/ and the README, taken with the set-up of the
 * browser tests (test/browser/support.ts: Debian's Chromium through playwright-core) against the
 * real service and the sandbox:
 *   npm run docs:screenshots
 * writes docs/front-desk.png (the README's), docs/front-desk-result.png (an eligible answer), docs/front-desk-mobile.png (360 px
 * wide) and docs/front-desk-operator.png (a refused payer login in the operator view).
 */
import { fileURLToPath } from 'node:url';
import { TENANT_A_KEY, startHarness } from '../test/support/harness.js';
import { launchChromium, runCheck, signIn } from '../test/browser/support.js';

const DOCS = fileURLToPath(new URL('../docs/', import.meta.url));

async function main(): Promise<void> {
  const harness = await startHarness({ timeScale: 0.01, pollIntervalMs: 50 });
  const browser = await launchChromium();
  try {
    const desk = await browser.newPage({ viewport: { width: 1000, height: 900 } });
    await signIn(desk, harness.url, TENANT_A_KEY);
    await desk.getByLabel('Patient name (optional)').fill('مريم الهاشمي');
    await runCheck(desk, '784-1990-0000002-2', 'NAS');
    await desk.getByLabel('Patient name (optional)').fill('Omar Haddad');
    await runCheck(desk, '784-1990-0000001-1');
    await desk.getByRole('region', { name: 'Recent checks' }).locator('li').nth(1).waitFor();
    await desk.screenshot({ path: `${DOCS}front-desk-result.png`, fullPage: true });
    // The README's picture: the whole page with a shorter answer (a member with several cards).
    await desk.getByLabel('Patient name (optional)').fill('Layla Mansour');
    await runCheck(desk, '784-1990-0000009-9');
    await desk.screenshot({ path: `${DOCS}front-desk.png`, fullPage: true });

    const phone = await browser.newPage({ viewport: { width: 360, height: 780 } });
    await signIn(phone, harness.url, TENANT_A_KEY);
    await runCheck(phone, '784-1990-0000009-9');
    await phone.getByRole('region', { name: 'Eligibility result' }).scrollIntoViewIfNeeded();
    await phone.screenshot({ path: `${DOCS}front-desk-mobile.png` });

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
