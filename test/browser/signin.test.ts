/// <reference lib="dom" />
/**
 * People sign in as themselves (docs/signin.md), in Chromium against a real OpenID provider on
 * loopback (oidc-provider, test/support/oidc-provider.ts) and the running service: the clinic
 * account sign-in to a session, refused sign-ins (wrong state, replayed state, bad nonce,
 * tampered ID token, the provider's error), CSRF, roles, the idle timeout, logout, the person in
 * the audit trail, and no token, code, secret or session id in any log line.
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import request from 'supertest';
import type { AuditEvent, Bundle } from 'fhir/r4.js';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../support/harness.js';
import { TENANT_A_KEY, startHarness } from '../support/harness.js';
import { expectValidFhir } from '../support/fhir.js';
import type { TestProvider } from '../support/oidc-provider.js';
import { OPERATOR_ROLE, PAGE_CLIENT_SECRET, startOidcProvider } from '../support/oidc-provider.js';
import { launchChromiumOrError, runCheck } from './support.js';

let provider: TestProvider;
let harness: Harness;
let browser: Browser;
let launchError: Error | undefined;
/** What the test's clock adds to the service's (the idle timeout without waiting). */
let clockOffset = 0;
/** The public base of the service (PUBLIC_BASE_URL's default: http://localhost:<port>). */
let base = '';
const contexts: BrowserContext[] = [];
/** Every URL the browser asked for, and every session cookie it was given. */
const urls: string[] = [];
const sessionIds: string[] = [];
const codes: string[] = [];

beforeAll(async () => {
  const launched = launchChromiumOrError();
  provider = await startOidcProvider();
  harness = await startHarness({
    timeScale: 0.01,
    pollIntervalMs: 50,
    oidc: { a: provider.settings },
    overrides: { now: () => Date.now() + clockOffset },
  });
  base = `http://localhost:${new URL(harness.url).port}`;
  provider.register(base);
  ({ browser, launchError } = await launched);
}, 60_000);

afterEach(async () => {
  for (const context of contexts.splice(0)) {
    for (const cookie of await context.cookies()) {
      if (cookie.name === 'eligibility_session') sessionIds.push(cookie.value);
    }
    await context.close();
  }
  provider.mode = 'normal';
  clockOffset = 0;
});

afterAll(async () => {
  await browser?.close();
  await harness?.stop();
  await provider?.close();
  // Nothing secret in any log line: the tokens the provider issued, the codes, the session ids,
  // the client secret, the API key.
  const secrets = [...provider.issued, ...codes, ...sessionIds, PAGE_CLIENT_SECRET, TENANT_A_KEY];
  expect(provider.issued.length).toBeGreaterThan(0);
  expect(codes.length).toBeGreaterThan(0);
  expect(sessionIds.length).toBeGreaterThan(0);
  expect(harness.logs.length).toBeGreaterThan(0);
  expect(harness.logs.filter((line) => secrets.some((secret) => line.includes(secret)))).toEqual([]);
  // No token or session id in a URL the browser asked for (the code is in the one redirect the
  // protocol sends it in, the callback, and nowhere else).
  const tokens = [...provider.issued, ...sessionIds, PAGE_CLIENT_SECRET];
  expect(urls.filter((url) => tokens.some((secret) => url.includes(secret)))).toEqual([]);
  expect(
    urls.filter((url) => codes.some((code) => url.includes(code)) && !url.includes('/app/callback')),
  ).toEqual([]);
});

async function newPage(): Promise<Page> {
  if (launchError) throw launchError;
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
  contexts.push(context);
  const page = await context.newPage();
  page.on('request', (req) => {
    urls.push(req.url());
    const url = new URL(req.url());
    const code = url.searchParams.get('code');
    if (url.pathname === '/app/callback' && code) codes.push(code);
  });
  return page;
}

/** Signs `login` in from the page through the provider's login form; resolves at the callback's answer. */
async function signInAs(page: Page, login: string): Promise<void> {
  await page.goto(`${base}/app/?tenant=clinic-a`);
  await page.getByRole('link', { name: 'Sign in with your clinic account' }).click();
  await page.locator('input[name=login]').fill(login);
  await page.locator('input[name=password]').fill('any password');
  await page.locator('button[type=submit]').click();
  await page.waitForURL((url) => url.pathname.startsWith('/app/') && url.pathname !== '/app/login');
}

/** A call from inside the page, with its cookie (and the CSRF token when given). */
function pageFetch(
  page: Page,
  path: string,
  init: { method?: string; csrf?: string; body?: unknown } = {},
): Promise<{ status: number; body: unknown }> {
  return page.evaluate(
    async ({ path, init }) => {
      const headers: Record<string, string> = { Accept: 'application/fhir+json, application/json' };
      if (init.csrf) headers['X-CSRF-Token'] = init.csrf;
      if (init.body) headers['Content-Type'] = 'application/fhir+json';
      const response = await fetch(path, {
        method: init.method ?? 'GET',
        headers,
        credentials: 'same-origin',
        body: init.body ? JSON.stringify(init.body) : undefined,
      });
      const text = await response.text();
      return { status: response.status, body: text.startsWith('{') ? (JSON.parse(text) as unknown) : text };
    },
    { path, init },
  );
}

/** GET /app/api/session with the browser's cookies (from any page, an error page too). */
async function sessionStatus(page: Page): Promise<number> {
  return (await page.request.get(`${base}/app/api/session`)).status();
}

interface SessionAnswer {
  name: string;
  roles: string[];
  tenant: string;
  expiresAt: string;
  csrfToken: string;
}

async function auditEvents(): Promise<AuditEvent[]> {
  await harness.server.audit.flush();
  const res = await request(harness.url).get('/fhir/AuditEvent?_count=200').set(harness.auth);
  expect(res.status).toBe(200);
  return ((res.body as Bundle).entry ?? []).map((e) => e.resource as AuditEvent);
}

describe('signing in with the clinic account', () => {
  it('signs a front desk in to a session: the page names them, checks work, no operator view', async () => {
    const page = await newPage();
    await signInAs(page, 'desk');
    expect(new URL(page.url()).search).toBe('');
    await expect.poll(() => page.locator('#signed-in-as').innerText()).toBe('Signed in as Mariam Desk');
    expect(await page.getByRole('tab', { name: 'Operator' }).isVisible()).toBe(false);

    const cookie = (await page.context().cookies()).find((c) => c.name === 'eligibility_session');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/', secure: false });
    expect(cookie?.value.length).toBeGreaterThanOrEqual(22);
    const session = await pageFetch(page, '/app/api/session');
    expect(session.status).toBe(200);
    const answer = session.body as SessionAnswer;
    expect(answer).toMatchObject({ name: 'Mariam Desk', roles: ['front-desk'], tenant: 'clinic-a' });
    expect(Date.parse(answer.expiresAt)).toBeGreaterThan(Date.now() + 14 * 60_000);

    const text = await runCheck(page, '784-1990-0000001-0');
    expect(text).toMatch(/eligible/i);
    // The cookie opens /app/api only, never /fhir.
    expect((await pageFetch(page, '/fhir/CoverageEligibilityResponse')).status).toBe(401);
    // The operator actions are refused to a front desk.
    expect((await pageFetch(page, '/app/api/operator')).status).toBe(403);
    const reset = await pageFetch(page, '/app/api/guards/DAMAN/reset', {
      method: 'POST',
      csrf: answer.csrfToken,
    });
    expect(reset.status).toBe(403);

    // The audit trail names the person: the sign-in (DICOM 110114/110122) and the check.
    const events = await auditEvents();
    for (const event of events) expectValidFhir(event);
    const mine = events.filter((e) => e.agent[0]?.who?.identifier?.value === 'desk');
    const login = mine.find((e) => e.subtype?.some((s) => s.code === '110122'));
    expect(login?.type).toMatchObject({ code: '110114' });
    expect(login?.outcome).toBe('0');
    const submit = mine.find((e) => e.subtype?.some((s) => s.code === '$submit'));
    expect(submit?.agent[0]).toMatchObject({
      who: { identifier: { system: provider.issuer, value: 'desk' }, display: 'Mariam Desk' },
      requestor: true,
    });
    expect(submit?.agent[1]?.who?.identifier?.value).toBe('clinic-a');
  });

  it('an operator sees and uses the operator view; every change needs the CSRF token', async () => {
    const page = await newPage();
    await signInAs(page, 'boss');
    await page.getByRole('tab', { name: 'Operator' }).click();
    await page.getByRole('region', { name: 'Queues' }).waitFor();
    const { csrfToken, roles } = (await pageFetch(page, '/app/api/session')).body as SessionAnswer;
    expect(roles).toContain(OPERATOR_ROLE);
    expect((await pageFetch(page, '/app/api/guards/DAMAN/reset', { method: 'POST' })).status).toBe(403);
    expect(
      (await pageFetch(page, '/app/api/guards/DAMAN/reset', { method: 'POST', csrf: 'not-the-token' }))
        .status,
    ).toBe(403);
    // With the token the call passes the CSRF and role checks: no guard of DAMAN is open (404).
    expect(
      (await pageFetch(page, '/app/api/guards/DAMAN/reset', { method: 'POST', csrf: csrfToken })).status,
    ).toBe(404);
    const submit = await pageFetch(page, '/app/api/fhir/CoverageEligibilityRequest/$submit', {
      method: 'POST',
      body: { resourceType: 'CoverageEligibilityRequest' },
    });
    expect(submit.status).toBe(403);
  });

  it('refuses the API key of a clinic that signs people in, on /app/api only (machines keep /fhir)', async () => {
    const app = await request(harness.url).get('/app/api/payers').set(harness.auth);
    expect(app.status).toBe(401);
    expect(JSON.stringify(app.body)).toContain('clinic account');
    expect((await request(harness.url).get('/app/api/payers').set(harness.authB)).status).toBe(200);
    expect(
      (await request(harness.url).get('/fhir/CoverageEligibilityResponse').set(harness.auth)).status,
    ).toBe(200);
    expect((await request(harness.url).get('/app/api/session')).status).toBe(401);
  });

  it('ends the session after SESSION_IDLE_MINUTES without use', async () => {
    const page = await newPage();
    await signInAs(page, 'desk');
    await expect.poll(() => page.locator('#signed-in-as').innerText()).toContain('Mariam Desk');
    clockOffset = 16 * 60_000;
    expect(await sessionStatus(page)).toBe(401);
    await page.getByRole('region', { name: 'Appointments' }).getByRole('button', { name: 'Show' }).click();
    await expect.poll(() => page.getByRole('alert').innerText()).toContain('session has ended');
    clockOffset = 0;
    // Ended for good: the row was deleted, not only refused while the clock was ahead.
    expect(await sessionStatus(page)).toBe(401);
  });

  it('signs out: the session ends and the browser goes to the provider’s end_session_endpoint', async () => {
    const page = await newPage();
    await signInAs(page, 'desk');
    await expect.poll(() => page.locator('#signed-in-as').innerText()).toContain('Mariam Desk');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL((url) => url.href.startsWith(`${provider.issuer}/session/end`));
    const endSession = new URL(page.url());
    expect(endSession.searchParams.get('client_id')).toBe('eligibility-page');
    expect(endSession.searchParams.get('post_logout_redirect_uri')).toBe(`${base}/app/`);
    expect(endSession.searchParams.has('id_token_hint')).toBe(false);
    await page.goto(`${base}/app/`);
    expect(await sessionStatus(page)).toBe(401);
    const events = await auditEvents();
    const logout = events.find((e) => e.subtype?.some((s) => s.code === '110123'));
    expect(logout?.agent[0]?.who).toMatchObject({ identifier: { value: 'desk' }, display: 'Mariam Desk' });
    expectValidFhir(logout);
  });
});

describe('refused sign-ins', () => {
  it('a state the service did not send: 400 with the reason, no session', async () => {
    const page = await newPage();
    const response = await page.goto(`${base}/app/callback?code=made-up-code&state=${'x'.repeat(43)}`);
    expect(response?.status()).toBe(400);
    expect(await page.locator('body').innerText()).toMatch(/not started here|already used/);
    expect(await page.content()).not.toContain('made-up-code');
    expect(await sessionStatus(page)).toBe(401);
  });

  it('a clinic without a clinic account, a callback without state, a sign-out without a session', async () => {
    const login = await request(harness.url).get('/app/login?tenant=clinic-b');
    expect(login.status).toBe(400);
    expect(login.text).toContain('does not sign people in with a clinic account');
    expect((await request(harness.url).get('/app/sign-in-options?tenant=clinic-b')).body).toEqual({
      clinicAccount: false,
    });
    expect((await request(harness.url).get('/app/sign-in-options?tenant=clinic-a')).body).toEqual({
      clinicAccount: true,
    });
    const start = await request(harness.url).get('/app/login?tenant=clinic-a');
    expect(start.status).toBe(302);
    const authorize = new URL(String(start.headers.location));
    expect(`${authorize.origin}${authorize.pathname}`).toBe(`${provider.issuer}/auth`);
    expect(Object.fromEntries(authorize.searchParams)).toMatchObject({
      response_type: 'code',
      client_id: 'eligibility-page',
      redirect_uri: `${base}/app/callback`,
      code_challenge_method: 'S256',
    });
    expect(authorize.searchParams.get('scope')?.split(' ')).toContain('openid');
    for (const name of ['state', 'nonce', 'code_challenge'])
      expect(authorize.searchParams.get(name)).toMatch(/.{22,}/);
    expect((await request(harness.url).get('/app/callback?code=x')).status).toBe(400);
    const out = await request(harness.url).post('/app/logout');
    expect(out.status).toBe(303);
    expect(out.headers.location).toBe(`${base}/app/`);
    expect(String(out.headers['set-cookie'])).toContain('eligibility_session=;');
  });

  it('a replayed state (the callback again): 400, no second session', async () => {
    const page = await newPage();
    let callback = '';
    page.on('request', (req) => {
      if (req.url().includes('/app/callback')) callback = req.url();
    });
    await signInAs(page, 'desk');
    expect(callback).not.toBe('');
    const other = await newPage();
    const response = await other.goto(callback);
    expect(response?.status()).toBe(400);
    expect(await sessionStatus(other)).toBe(401);
  });

  it.each([
    ['an ID token whose nonce is not the one sent (signed by the provider)', 'bad-nonce' as const],
    ['an ID token changed after it was signed', 'tampered' as const],
  ])('%s: 401 with the reason, no session, a refused Login event', async (_what, mode) => {
    provider.mode = mode;
    const page = await newPage();
    const answers: number[] = [];
    page.on('response', (res) => {
      if (res.url().includes('/app/callback')) answers.push(res.status());
    });
    await signInAs(page, 'desk');
    expect(answers).toEqual([401]);
    expect(await page.locator('body').innerText()).toContain('could not be verified');
    const content = await page.content();
    expect([...codes, ...provider.issued].filter((secret) => content.includes(secret))).toEqual([]);
    expect((await page.context().cookies()).some((c) => c.name === 'eligibility_session')).toBe(false);
    expect(await sessionStatus(page)).toBe(401);
    const refused = (await auditEvents()).filter(
      (e) => e.subtype?.some((s) => s.code === '110122') && e.outcome === '4',
    );
    expect(refused.length).toBeGreaterThan(0);
    for (const event of refused) expectValidFhir(event);
  });

  it('the provider’s error (the person cancelled): 401 saying so', async () => {
    const page = await newPage();
    await page.goto(`${base}/app/?tenant=clinic-a`);
    await page.getByRole('link', { name: 'Sign in with your clinic account' }).click();
    await page.getByRole('link', { name: /Cancel/ }).click();
    await page.waitForURL((url) => url.pathname === '/app/callback');
    expect(await page.locator('body').innerText()).toContain('access_denied');
    expect(await sessionStatus(page)).toBe(401);
  });
});
