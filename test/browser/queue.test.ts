/// <reference lib="dom" />
/**
 * The page's wait line (docs/queue.md) in a real browser against the service and the sandbox: a
 * clinic with one slot, held by one check with two more desk checks waiting; the page's check says
 * "Waiting for a free payer-portal slot: 2 checks ahead, about N min" while it waits, then shows
 * its answer. The page's check is desk work. The operator view shows the line per class.
 */
import type { Browser } from 'playwright-core';
import request from 'supertest';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../support/harness.js';
import { TENANT_A_KEY } from '../support/harness.js';
import { emiratesId } from '../support/emirates-id.js';
import { postSubmit } from '../support/submit.js';
import type { Watched } from './support.js';
import { closeOpened, openWatched, signIn, startWithChromium } from './support.js';

let harness: Harness;
let browser: Browser;
const opened: Watched[] = [];
let launchError: Error | undefined;

beforeAll(async () => {
  // One slot; the sandbox's timelines at scale 0.02 (its `slow` scenario: 6 s).
  ({ harness, browser, launchError } = await startWithChromium({
    timeScale: 0.05,
    pollIntervalMs: 100,
    maxInFlight: 1,
  }));
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await harness?.stop();
});

afterEach(async () => {
  for (const { elsewhere } of await closeOpened(opened)) expect(elsewhere).toEqual([]);
});

describe('the page while a check waits for a slot', () => {
  it('says how many checks are ahead and about how long, then shows the answer', async () => {
    const { page } = await openWatched(opened, browser, launchError, harness.url);
    await signIn(page, harness.url, TENANT_A_KEY);
    // One slow check in the only slot, two desk checks waiting behind it.
    const ids = ['784-1990-0000012-7', emiratesId(1983, 6_400_001), emiratesId(1983, 6_400_002)];
    for (const id of ids) {
      const res = await postSubmit(
        harness.url,
        harness.auth,
        { emiratesId: id },
        { Prefer: 'respond-async' },
      );
      expect(res.status).toBe(202);
    }
    await page.getByLabel('Emirates ID or card number').fill(emiratesId(1983, 6_400_010));
    await page.getByLabel('Payer', { exact: true }).fill('DAMAN');
    await page.getByRole('button', { name: 'Check eligibility' }).click();
    const status = page.getByRole('status');
    await status
      .filter({ hasText: /Waiting for a free payer-portal slot: 2 checks ahead, about \d+ min/ })
      .waitFor({
        timeout: 10_000,
      });
    await status.filter({ hasText: /^Done/ }).waitFor({ timeout: 90_000 });

    // The page's check is desk work.
    const { checks } = await harness.server.store.search(
      'clinic-a',
      {},
      { count: 1, offset: 0, total: false },
    );
    expect(checks[0]).toMatchObject({ queueClass: 'desk', priority: 'normal' });

    // The operator view's Queues: the line per class.
    const view = await request(harness.url).get('/app/api/operator').set(harness.auth);
    expect(view.status).toBe(200);
    expect((view.body as { queues: unknown[] }).queues[0]).toMatchObject({
      desk: { waiting: 0 },
      background: { waiting: 0, running: 0 },
      maxInFlight: 1,
      deskSlots: 0,
    });
    await page.getByRole('tab', { name: /Operator/ }).click();
    const queues = page.getByRole('region', { name: 'Checks per clinic and class table' });
    await queues.waitFor();
    expect(await queues.innerText()).toMatch(/Desk[\s\S]*Background/);
  }, 120_000);
});
