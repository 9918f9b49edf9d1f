/**
 * Chromium for the browser tests and the screenshots (scripts/screenshots.ts): Debian's
 * /usr/bin/chromium driven by playwright-core, headless, with nothing of its own going out
 * (no background networking, updates or sync). A missing chromium is an error, never a skip:
 * `.ci/run` installs it.
 */
import { existsSync } from 'node:fs';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { chromium } from 'playwright-core';
import { startHarness, type Harness, type HarnessOptions } from '../support/harness.js';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`Chromium not found at ${CHROMIUM}: apt-get install -y chromium (.ci/run does it)`);
  }
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-background-networking',
      '--disable-gpu',
      '--no-first-run',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/**
 * A launch of Chromium for a test file's beforeAll, started beside the file's servers: a launch
 * that fails is handed back as `launchError` (the `browser` is then unusable) so that the tests
 * that open a page fail with it (openWatched), never a skip, and the others still run.
 */
export interface Launched {
  browser: Browser;
  launchError: Error | undefined;
}

export async function launchChromiumOrError(): Promise<Launched> {
  try {
    return { browser: await launchChromium(), launchError: undefined };
  } catch (error: unknown) {
    return {
      browser: undefined as unknown as Browser,
      launchError: error instanceof Error ? error : new Error(String(error)),
    };
  }
}

/** The harness (startHarness with `options`) and Chromium, started side by side. */
export async function startWithChromium(options: HarnessOptions): Promise<Launched & { harness: Harness }> {
  const [harness, launched] = await Promise.all([startHarness(options), launchChromiumOrError()]);
  return { harness, ...launched };
}

/** Every request a page made, and the ones to another host (aborted before they leave). */
export interface Watched {
  context: BrowserContext;
  page: Page;
  urls: string[];
  elsewhere: string[];
}

/** A new context whose requests may only go to `origin` (blob: and data: stay in the browser). */
export async function watchedPage(
  browser: Browser,
  origin: string,
  viewport = { width: 1100, height: 900 },
): Promise<Watched> {
  const context = await browser.newContext({ viewport });
  const urls: string[] = [];
  const elsewhere: string[] = [];
  const allowed = new URL(origin).host;
  await context.route('**/*', async (route) => {
    const url = route.request().url();
    urls.push(url);
    if (/^(blob|data):/.test(url) || new URL(url).host === allowed) await route.continue();
    else {
      elsewhere.push(url);
      await route.abort();
    }
  });
  const page = await context.newPage();
  return { context, page, urls, elsewhere };
}

/**
 * A watched page for one test, kept in `opened` until the file's afterEach closes it
 * (closeOpened). A Chromium that did not launch fails the test with its error, never a skip.
 */
export async function openWatched(
  opened: Watched[],
  browser: Browser,
  launchError: Error | undefined,
  origin: string,
  viewport?: { width: number; height: number },
): Promise<Watched> {
  if (launchError) throw launchError;
  const watched = await watchedPage(browser, origin, viewport);
  opened.push(watched);
  return watched;
}

/** Closes the pages of a test (openWatched) and hands them back, for the checks of what they asked for. */
export async function closeOpened(opened: Watched[]): Promise<Watched[]> {
  const closing = opened.splice(0);
  for (const { context } of closing) await context.close();
  return closing;
}

/** Signs in on /app/ with the mouse-free path a user takes: type the key, press Enter. */
export async function signIn(page: Page, origin: string, key: string): Promise<void> {
  await page.goto(`${origin}/app/`);
  await page.getByLabel('API key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByLabel('Emirates ID or card number').waitFor();
}

/** Runs one check from the form and waits for its result (the `Eligibility result` region). */
export async function runCheck(page: Page, patientId: string, payer = 'DAMAN'): Promise<string> {
  await page.getByLabel('Emirates ID or card number').fill(patientId);
  // The payer field takes any code (a list of suggestions beside it): typed as a receptionist does.
  await page.getByLabel('Payer', { exact: true }).fill(payer);
  await page.getByRole('button', { name: 'Check eligibility' }).click();
  await page.getByRole('status').filter({ hasText: /^Done/ }).waitFor({ timeout: 20_000 });
  const result = page.getByRole('region', { name: 'Eligibility result' });
  await result.waitFor();
  return result.innerText();
}
