/**
 * Crash and scale-out drills with real processes (issue 4, "Done when"):
 * - SIGKILL with 50 checks in flight, restart: all finish, exactly 50 create-task calls.
 * - Two replicas on one PostgreSQL database: 100 checks across 5 tenants with maxInFlight 3;
 *   one replica SIGKILLed mid-run (at a moment it has no create-task call out): all 100
 *   complete, exactly 100 create-task calls, never more than 3 upstream tasks running for any
 *   tenant.
 * The sandbox upstream runs in this test process and counts what it sees.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CoverageEligibilityResponse } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, describe, expect, it } from 'vitest';
import { startSandbox } from '../../src/sandbox/index.js';
import { expectValidFhir } from '../support/fhir.js';
import { trackInFlight, UPSTREAM_KEY } from '../support/harness.js';
import type { ServiceProcess } from '../support/process.js';
import { spawnService, tenantAuth, writeTenantsFile } from '../support/process.js';
import { eligibilityRequest } from '../support/requests.js';
import { until } from '../support/until.js';
import { createTestSchema } from '../support/postgres.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';
const FHIR_JSON = 'application/fhir+json';

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

async function submitMany(
  url: string,
  tenants: number,
  total: number,
): Promise<{ tenant: number; path: string }[]> {
  const made: { tenant: number; path: string }[] = [];
  for (let i = 0; i < total; i += 1) {
    const tenant = i % tenants;
    const res = await request(url)
      .post(SUBMIT)
      .set(tenantAuth(tenant))
      .set('Content-Type', FHIR_JSON)
      // The same patient every time, and each one meant as a real check (no reuse of an answer).
      .set('Cache-Control', 'no-cache')
      .send(eligibilityRequest({ emiratesId: '784-1990-0000001-0', identifier: `drill-${Date.now()}-${i}` }));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    made.push({ tenant, path: new URL(String(res.headers.location)).pathname });
  }
  return made;
}

/** Every check's CER once each one's outcome is `until` (re-read by the caller's poll loop). */
async function allCers(
  url: string,
  checks: { tenant: number; path: string }[],
  until: (outcome: CoverageEligibilityResponse['outcome']) => boolean,
): Promise<CoverageEligibilityResponse[] | undefined> {
  const cers: CoverageEligibilityResponse[] = [];
  for (const check of checks) {
    const res = await request(url).get(check.path).set(tenantAuth(check.tenant));
    const cer = res.body as CoverageEligibilityResponse;
    if (!until(cer.outcome)) return undefined;
    cers.push(cer);
  }
  return cers;
}

/** How many stored checks are in a state, from the service's /metrics. */
async function checksIn(url: string, state: string): Promise<number> {
  const res = await request(url).get('/metrics');
  let total = 0;
  for (const line of String(res.text).split('\n')) {
    const m = /^checks\{[^}]*state="([^"]+)"[^}]*\} (\S+)/.exec(line);
    if (m?.[1] === state) total += Number(m[2]);
  }
  return total;
}

describe('npm start defaults', () => {
  it("with no UPSTREAM_BASE_URL and no TENANTS_FILE: sandbox mode, said loudly; health, metadata and the README's first request work", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fea-sandbox-mode-'));
    const service = await spawnService({
      DATABASE_URL: `sqlite:${join(dir, 'adapter.db')}`,
      SANDBOX_TIME_SCALE: '0.1',
      POLL_INTERVAL_MS: '200',
    });
    cleanups.push(() => service.stop());
    expect(service.output.join('\n')).toContain('SANDBOX MODE');
    expect((await request(service.url).get('/health')).status).toBe(200);
    const metadata = await request(service.url).get('/fhir/metadata');
    expect(metadata.status).toBe(200);
    expectValidFhir(metadata.body);
    // The README's first request, as a new user pastes it.
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const body = /-d '(\{[\s\S]*?\})'\n```/.exec(readme)?.[1];
    expect(body, "README's first request").toBeDefined();
    const res = await request(service.url)
      .post(SUBMIT)
      .set('Authorization', 'Bearer sandbox')
      .set('Prefer', 'wait=30')
      .set('Content-Type', FHIR_JSON)
      .send(body ?? '');
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expectValidFhir(res.body);
    const cer = res.body as CoverageEligibilityResponse;
    expect(cer.outcome).toBe('complete');
    expect(cer.insurance?.[0]?.inforce).toBe(true);
  }, 60_000);
});

describe('process drills', () => {
  it('SIGKILL with 50 checks in flight, restart: all 50 finish, exactly 50 create-task calls', async () => {
    const sandbox = await startSandbox({ port: 0, timeScale: 3, apiKeys: [UPSTREAM_KEY] });
    cleanups.push(() => sandbox.close());
    const dir = mkdtempSync(join(tmpdir(), 'fea-kill-'));
    const env = {
      UPSTREAM_BASE_URL: sandbox.url,
      TENANTS_FILE: writeTenantsFile(dir, 5, UPSTREAM_KEY, 10),
      DATABASE_URL: `sqlite:${join(dir, 'adapter.db')}`,
      POLL_INTERVAL_MS: '200',
      SUBMIT_WAIT_MS: '0',
      LEASE_MS: '2000',
    };
    const first = await spawnService(env);
    cleanups.push(() => first.kill());
    const checks = await submitMany(first.url, 5, 50);
    // Every task exists upstream and none has finished: the process dies with all 50 in flight.
    await until(() => (sandbox.control.stats().createTask === 50 ? true : undefined), 20_000, '50 tasks');
    // ... and the service has stored every task id (no create-task answer still on its way, which
    // a kill would make ambiguous): 50 checks polling.
    await until(
      async () => ((await checksIn(first.url, 'polling')) === 50 ? true : undefined),
      20_000,
      '50 polling',
    );
    await first.kill();

    const second = await spawnService(env);
    cleanups.push(() => second.stop());
    const cers = await until(
      () => allCers(second.url, checks, (o) => o === 'complete'),
      60_000,
      'all checks complete',
    );
    expect(cers).toHaveLength(50);
    for (const cer of cers) {
      expectValidFhir(cer);
      expect(cer.insurance?.[0]?.inforce).toBe(true);
    }
    expect(sandbox.control.stats().createTask).toBe(50);
    // The waits above budget 20 s + 60 s; the test may use all of it on a loaded CI machine.
  }, 120_000);

  it('two replicas on PostgreSQL, one killed mid-run: all 100 complete, exactly 100 create-task calls, maxInFlight 3 held', async () => {
    const sandbox = await startSandbox({ port: 0, timeScale: 0.3, apiKeys: [UPSTREAM_KEY] });
    cleanups.push(() => sandbox.close());
    const { name: schema, url, admin, drop } = await createTestSchema('drill');
    cleanups.push(drop);
    const dir = mkdtempSync(join(tmpdir(), 'fea-pg-'));
    const env = {
      UPSTREAM_BASE_URL: sandbox.url,
      TENANTS_FILE: writeTenantsFile(dir, 5, UPSTREAM_KEY, 3),
      DATABASE_URL: url,
      POLL_INTERVAL_MS: '100',
      SUBMIT_WAIT_MS: '0',
      LEASE_MS: '2000',
      // A check takes about 1 s here; an ambiguous create-task holds its tenant slot for one check
      // timeout, so keep that short (the default 5 min would stall a tenant with maxInFlight 3).
      CHECK_TIMEOUT_MS: '15000',
    };
    const replicas: ServiceProcess[] = [await spawnService(env), await spawnService(env)];
    cleanups.push(() => replicas[1]?.stop() ?? Promise.resolve());
    cleanups.push(() => replicas[0]?.kill() ?? Promise.resolve());
    const [a, b] = replicas as [ServiceProcess, ServiceProcess];
    const inFlight = trackInFlight(sandbox);
    cleanups.push(() => Promise.resolve(inFlight.stop()));
    const first = await submitMany(a.url, 5, 50);
    const second = await submitMany(b.url, 5, 50);
    await until(() => (sandbox.control.stats().createTask >= 30 ? true : undefined), 30_000, '30 tasks');
    // Kill replica a mid-run, at a moment when it has no create-task call out: a call out at the
    // kill would be answered ambiguous-create by design (never re-sent: the upstream may have
    // started a portal session), which is the SIGKILL drill's business, not this test's. Frozen
    // with SIGSTOP, a cannot start a call between the look at the store and the kill.
    await until(
      async () => {
        a.child.kill('SIGSTOP');
        const out = await admin.query<{ n: string }>(
          `SELECT count(*) AS n FROM ${schema}.checks WHERE state = 'creating'`,
        );
        if (Number(out.rows[0]?.n) === 0) return true;
        a.child.kill('SIGCONT');
        await new Promise((resolve) => setTimeout(resolve, 20));
        return undefined;
      },
      30_000,
      'a moment with no create-task out',
    );
    const running = await admin.query<{ n: string }>(
      `SELECT count(*) AS n FROM ${schema}.checks WHERE state <> 'done'`,
    );
    await a.kill();
    // Mid-run: checks were still to be done when a died.
    expect(Number(running.rows[0]?.n)).toBeGreaterThan(0);
    const cers = await until(
      () => allCers(b.url, [...first, ...second], (o) => o !== 'queued'),
      120_000,
      'all checks answered',
    );
    expect(cers).toHaveLength(100);
    for (const cer of cers) expectValidFhir(cer);
    inFlight.stop();
    // Nothing lost: every check completes, found eligible, each created exactly once.
    expect(cers.filter((cer) => cer.outcome === 'complete')).toHaveLength(100);
    for (const cer of cers) expect(cer.insurance?.[0]?.inforce).toBe(true);
    expect(sandbox.control.stats().createTask).toBe(100);
    expect(inFlight.maxByClinic.size).toBe(5);
    for (const [clinic, max] of inFlight.maxByClinic) expect(max, clinic).toBeLessThanOrEqual(3);
    // The waits above budget 30 s + 120 s (locally the run takes about 23 s; CI hit the 30 s default).
  }, 200_000);
});
