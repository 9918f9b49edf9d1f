/// <reference lib="dom" />
/**
 * A page session lives in the store (docs/signin.md): signed in at one replica, the same browser
 * is served by a second replica on the same PostgreSQL store and by a replica started after the
 * first stopped (a restart); while the store is down a session lookup answers 503 with
 * Retry-After, never 500, and the session is back with the store. Also a tenant whose client
 * authenticates with private_key_jwt (`clientKeys`). Chromium against a real OpenID
 * provider on loopback, a PostgreSQL server of this test's own (stopped as a failover does).
 */
import type { Browser, BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Harness, HarnessOptions } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import type { TestProvider } from '../support/oidc-provider.js';
import { startOidcProvider } from '../support/oidc-provider.js';
import type { PrivatePostgres } from '../support/private-postgres.js';
import { startPrivatePostgres } from '../support/private-postgres.js';
import { launchChromium } from './support.js';

let provider: TestProvider;
let postgres: PrivatePostgres;
let browser: Browser;
let context: BrowserContext | undefined;
const replicas: Harness[] = [];
let options: HarnessOptions;

beforeAll(async () => {
  [provider, postgres, browser] = await Promise.all([
    startOidcProvider(),
    startPrivatePostgres(),
    launchChromium(),
  ]);
  options = {
    databaseUrl: await postgres.createDatabase('signin_replicas'),
    oidc: { a: provider.settings, b: provider.keySettings },
  };
}, 60_000);

afterAll(async () => {
  await context?.close();
  await browser?.close();
  for (const replica of replicas) await replica.stop().catch(() => undefined);
  await provider?.close();
  await postgres?.close();
});

async function replica(): Promise<{ harness: Harness; base: string }> {
  const harness = await startHarness(options);
  replicas.push(harness);
  return { harness, base: `http://localhost:${new URL(harness.url).port}` };
}

describe('a page session on PostgreSQL', () => {
  it('signs a person in for a tenant whose client authenticates with private_key_jwt (clientKeys)', async () => {
    const { base } = replicas[0]
      ? { base: `http://localhost:${new URL(replicas[0].url).port}` }
      : await replica();
    provider.register(base);
    const keyContext = await browser.newContext();
    try {
      const page = await keyContext.newPage();
      await page.goto(`${base}/app/?tenant=clinic-b`);
      await page.getByRole('link', { name: 'Sign in with your clinic account' }).click();
      await page.locator('input[name=login]').fill('boss');
      await page.locator('input[name=password]').fill('any password');
      await page.locator('button[type=submit]').click();
      await page.waitForURL(`${base}/app/`);
      const session = await page.request.get(`${base}/app/api/session`);
      expect(await session.json()).toMatchObject({
        name: 'Omar Operator',
        tenant: 'clinic-b',
        operator: true,
      });
    } finally {
      await keyContext.close();
    }
  });

  it('is served by a second replica and after a restart; a lookup while the store is down is 503', async () => {
    const one = await replica();
    const two = await replica();
    provider.register(one.base);
    context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${one.base}/app/?tenant=clinic-a`);
    await page.getByRole('link', { name: 'Sign in with your clinic account' }).click();
    await page.locator('input[name=login]').fill('desk');
    await page.locator('input[name=password]').fill('any password');
    await page.locator('button[type=submit]').click();
    await page.waitForURL(`${one.base}/app/`);
    await expect.poll(() => page.locator('#signed-in-as').innerText()).toContain('Mariam Desk');

    // The cookie is the host's (localhost), whatever the port: the other replica reads the row.
    await page.goto(`${two.base}/app/`);
    await expect.poll(() => page.locator('#signed-in-as').innerText()).toContain('Mariam Desk');

    // A restart: the first replica stops, a new one starts on the same store.
    await one.harness.stop();
    replicas.splice(replicas.indexOf(one.harness), 1);
    const three = await replica();
    const session = await page.request.get(`${three.base}/app/api/session`);
    expect(session.status()).toBe(200);
    expect(await session.json()).toMatchObject({ name: 'Mariam Desk', tenant: 'clinic-a' });

    await postgres.stop('fast');
    try {
      const started = Date.now();
      const down = await page.request.get(`${three.base}/app/api/session`);
      expect(down.status()).toBe(503);
      expect(Number(down.headers()['retry-after'])).toBeGreaterThan(0);
      expect(await down.json()).toMatchObject({ resourceType: 'OperationOutcome' });
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await postgres.start();
    }
    await expect
      .poll(async () => (await page.request.get(`${two.base}/app/api/session`)).status(), { timeout: 20_000 })
      .toBe(200);
  }, 90_000);
});
