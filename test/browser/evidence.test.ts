/// <reference lib="dom" />
/**
 * A document whose every link is refused (the portal letter, expired at issue) as the front-desk
 * page shows it, in real Chromium against the service and the sandbox over real HTTP
 * (docs/evidence.md): from its first failed try "Not kept yet" with the next try in the clinic's
 * time, with nothing to open, beside the other documents kept; once given up (the service's clock
 * moved to each next try, never the real date), "Could not be kept" with why.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../support/harness.js';
import { TENANT_A_KEY, startHarness } from '../support/harness.js';
import { submitFinal } from '../support/submit.js';
import { until } from '../support/until.js';
import type { Watched } from './support.js';
import { closeOpened, launchChromiumOrError, openWatched } from './support.js';

const LETTER = '_eligibility-letter.pdf';
const RETRY_MS = 30 * 60_000;

let harness: Harness;
let browser: Browser;
let launchError: Error | undefined;
/** The service's clock runs `shift` ms ahead of the real one. */
let shift = 0;
let cerId = '';
let letterId = '';
let letterTitle = '';
const opened: Watched[] = [];

beforeAll(async () => {
  const [started, launched] = await Promise.all([
    startHarness({ evidenceRetryMs: RETRY_MS, overrides: { now: () => Date.now() + shift } }),
    launchChromiumOrError(),
  ]);
  harness = started;
  ({ browser, launchError } = launched);
  harness.sandbox.control.refuseLinks([LETTER]);
  const path = await submitFinal(harness.url, harness.auth, {
    emiratesId: '784-1990-0000001-0',
    payer: 'DAMAN',
  });
  cerId = path.split('/').pop() ?? '';
  // The letter (its every link refused) is the one document left pending after its first try.
  const rows = await until(async () => {
    const found = await harness.server.store.evidence.ofCheck('clinic-a', cerId);
    return found.some((r) => r.attempts > 0 && r.state === 'pending') ? found : undefined;
  }, 15_000);
  const letter = rows.find((r) => r.attempts > 0 && r.state === 'pending')!;
  letterId = letter.id;
  letterTitle = letter.label;
}, 60_000);

afterAll(async () => {
  harness?.sandbox.control.refuseLinks([]);
  await browser?.close();
  await harness?.stop();
});

afterEach(async () => {
  for (const { elsewhere } of await closeOpened(opened)) expect(elsewhere).toEqual([]);
});

/** The answer opened by its deep link on a fresh tab, signed in with the key: the Documents list. */
async function documentsShown(): Promise<{ page: Page; text: string }> {
  const { page } = await openWatched(opened, browser, launchError, harness.url);
  page.setDefaultTimeout(10_000);
  await page.goto(`${harness.url}/app/#answer=${cerId}`);
  await page.getByLabel('API key').fill(TENANT_A_KEY);
  await page.getByRole('button', { name: 'Sign in' }).click();
  const list = page.locator('#documents');
  await list.getByText(letterTitle, { exact: false }).first().waitFor();
  return { page, text: await list.innerText() };
}

/** An instant as the page writes it for Dubai (UTC+4, no daylight saving). */
const dubai = (ms: number) =>
  `${new Date(ms + 4 * 3_600_000).toISOString().slice(0, 16).replace('T', ' ')} Dubai time`;

describe('a document not kept yet, then not kept, on the page', () => {
  it('says "Not kept yet" with the next try in clinic time, nothing to open, the others kept', async () => {
    const row = (await harness.server.store.evidence.ofCheck('clinic-a', cerId)).find(
      (r) => r.id === letterId,
    )!;
    await until(async () => {
      const rows = await harness.server.store.evidence.ofCheck('clinic-a', cerId);
      return rows.filter((r) => r.id !== letterId).every((r) => r.state === 'kept') ? true : undefined;
    }, 15_000);
    const { page, text } = await documentsShown();
    expect(text).toContain(
      `${letterTitle}: Not kept yet: the payer portal refused its link; the next try is at ${dubai(row.nextRunAt)}.`,
    );
    // Nothing to open for it, and no "kept until" beside it; the screenshot is kept and can be opened.
    const buttons = await page.locator('#documents button').allInnerTexts();
    expect(buttons.some((b) => b.includes(letterTitle))).toBe(false);
    expect(buttons.length).toBeGreaterThan(0);
    await page.locator('#documents .kept').first().waitFor();
  });

  it('once every try is refused: "Could not be kept" with why, never as kept', async () => {
    let row = (await harness.server.store.evidence.ofCheck('clinic-a', cerId)).find(
      (r) => r.id === letterId,
    )!;
    for (let tries = 0; row.state === 'pending' && tries < 10; tries++) {
      const attempts = row.attempts;
      shift = row.nextRunAt - Date.now() + 1_000;
      await harness.server.evidence.tick();
      row = await until(async () => {
        const now = (await harness.server.store.evidence.ofCheck('clinic-a', cerId)).find(
          (r) => r.id === letterId,
        )!;
        return now.attempts > attempts ? now : undefined;
      }, 10_000);
    }
    expect(row.state).toBe('failed');
    const { page, text } = await documentsShown();
    expect(text).toContain(
      `${letterTitle}: Could not be kept: the payer portal refused its link at every try.`,
    );
    expect(text).not.toContain('Not kept yet');
    const buttons = await page.locator('#documents button').allInnerTexts();
    expect(buttons.some((b) => b.includes(letterTitle))).toBe(false);
  });
});
