/**
 * The pre-visit re-check is durable (docs/previsit.md): the service is SIGKILLed right after a
 * booking and started again before the re-check is due; exactly one re-check runs, on SQLite and
 * on PostgreSQL. Real processes with a real clock: the lead (PREVISIT_LEAD_MINUTES, decimals
 * allowed) puts the re-check a few seconds after the booking.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CoverageEligibilityResponse } from 'fhir/r4.js';
import request from 'supertest';
import { afterAll, describe, expect, it } from 'vitest';
import { startSandbox } from '../../src/sandbox/index.js';
import { UPSTREAM_KEY } from '../support/harness.js';
import { spawnService, tenantAuth, writeTenantsFile } from '../support/process.js';
import { eligibilityRequest } from '../support/requests.js';
import { until } from '../support/until.js';
import { createTestSchema } from '../support/postgres.js';

/** member_not_found in the sandbox: never reusable, so the re-check always runs. */
const NOT_FOUND = '784-1990-0000003-6';

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

async function postgresUrl(): Promise<string> {
  const schema = await createTestSchema('previsit');
  cleanups.push(() => schema.drop());
  return schema.url;
}

describe('a killed service and the pre-visit re-check', () => {
  it.each(['sqlite', 'postgres'])(
    'killed after booking and restarted before the re-check: exactly one re-check (%s)',
    async (kind) => {
      const sandbox = await startSandbox({ port: 0, timeScale: 0.05, apiKeys: [UPSTREAM_KEY] });
      cleanups.push(() => sandbox.close());
      const dir = mkdtempSync(join(tmpdir(), 'fea-previsit-'));
      const env = {
        UPSTREAM_BASE_URL: sandbox.url,
        TENANTS_FILE: writeTenantsFile(dir, 1, UPSTREAM_KEY, 3),
        DATABASE_URL: kind === 'sqlite' ? `sqlite:${join(dir, 'adapter.db')}` : await postgresUrl(),
        POLL_INTERVAL_MS: '100',
        LEASE_MS: '2000',
        // Start in 3 minutes, re-check 2.9 minutes before it: due 6 s after the booking.
        PREVISIT_LEAD_MINUTES: '2.9',
      };
      const first = await spawnService(env);
      cleanups.push(() => first.kill());
      const start = new Date(Date.now() + 3 * 60_000).toISOString();
      const booked = await request(first.url)
        .post('/fhir/CoverageEligibilityRequest/$submit')
        .set(tenantAuth(0))
        .set('Content-Type', 'application/fhir+json')
        .set('Prefer', 'wait=10')
        .send(eligibilityRequest({ emiratesId: NOT_FOUND, servicedPeriod: { start } }));
      expect(booked.status).toBe(200);
      const bookingId = (booked.body as CoverageEligibilityResponse).id ?? '';
      expect(sandbox.control.stats().createTask).toBe(1);
      await first.kill();

      const second = await spawnService(env);
      cleanups.push(() => second.stop());
      await until(() => (sandbox.control.stats().createTask >= 2 ? true : undefined), 30_000, 'the re-check');
      // Its CER refers to the same stored request and is final.
      const search = await until(
        async () => {
          const res = await request(second.url)
            .get(`/fhir/CoverageEligibilityResponse?request=${bookingId}`)
            .set(tenantAuth(0));
          const entries = (res.body as { entry?: { resource: CoverageEligibilityResponse }[] }).entry ?? [];
          return entries.length === 2 && entries.every((e) => e.resource.outcome !== 'queued')
            ? entries
            : undefined;
        },
        20_000,
        'both answers',
      );
      expect(search.map((e) => e.resource.request?.reference)).toEqual([
        `CoverageEligibilityRequest/${bookingId}`,
        `CoverageEligibilityRequest/${bookingId}`,
      ]);
      // A while longer: still one re-check.
      await new Promise((r) => setTimeout(r, 3000));
      expect(sandbox.control.stats().createTask).toBe(2);
    },
    90_000,
  );
});
