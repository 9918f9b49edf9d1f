/**
 * The desk first survives a SIGKILL (docs/queue.md): a backlog of background work is accepted by
 * one process, which is killed; the service is started again (on PostgreSQL as two replicas
 * claiming at once) and desk checks sent then start ahead of the backlog, which keeps to
 * maxInFlight - deskSlots slots and never exceeds maxInFlight in all, then drains. The class and
 * deadline are read from the store, never kept in memory. Real processes, a real sandbox.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/checks/store/open.js';
import type { Store } from '../../src/checks/store/appointment-store.js';
import { startSandbox } from '../../src/sandbox/index.js';
import { trackInFlight, UPSTREAM_KEY } from '../support/harness.js';
import { spawnService, tenantAuth, writeTenantsFile } from '../support/process.js';
import type { ServiceProcess } from '../support/process.js';
import { eligibilityRequest } from '../support/requests.js';
import { until } from '../support/until.js';
import { createTestSchema } from '../support/postgres.js';
import { emiratesId } from '../support/emirates-id.js';

const MAX_IN_FLIGHT = 3;
const BACKLOG = 12;

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

function submit(service: ServiceProcess, body: unknown, prefer = 'respond-async') {
  return request(service.url)
    .post(
      body && (body as { resourceType?: string }).resourceType === 'Bundle'
        ? '/fhir'
        : '/fhir/CoverageEligibilityRequest/$submit',
    )
    .set(tenantAuth(0))
    .set('Content-Type', 'application/fhir+json')
    .set('Prefer', prefer)
    .send(body as object);
}

/** The tenant's line as the store holds it. */
async function line(store: Store) {
  return store.countQueueByClass('t0');
}

describe('a killed service and the desk first', () => {
  it.each(['sqlite', 'postgres'])(
    'desk checks sent after a restart start ahead of a backlog accepted before it (%s)',
    async (kind) => {
      // The sandbox's fixed timelines at scale 0.05 (a task in 0.1 to 0.2 s); the killed replica's
      // leases (LEASE_MS 2 s) hold its two slots a while after the restart.
      const sandbox = await startSandbox({ port: 0, timeScale: 0.05, apiKeys: [UPSTREAM_KEY] });
      cleanups.push(() => sandbox.close());
      const inFlight = trackInFlight(sandbox);
      cleanups.push(() => Promise.resolve(inFlight.stop()));
      const dir = mkdtempSync(join(tmpdir(), 'fea-queue-'));
      let databaseUrl = `sqlite:${join(dir, 'adapter.db')}`;
      if (kind === 'postgres') {
        const schema = await createTestSchema('queue');
        cleanups.push(() => schema.drop());
        databaseUrl = schema.url;
      }
      const env = {
        UPSTREAM_BASE_URL: sandbox.url,
        TENANTS_FILE: writeTenantsFile(dir, 1, UPSTREAM_KEY, MAX_IN_FLIGHT),
        DATABASE_URL: databaseUrl,
        POLL_INTERVAL_MS: '200',
        LEASE_MS: '2000',
        // A create-task cut off by the kill holds its slot one timeout: kept short.
        CHECK_TIMEOUT_MS: '20000',
      };
      const first = await spawnService(env);
      cleanups.push(() => first.kill());
      const store = await openStore(databaseUrl);
      cleanups.push(() => store.close());

      // The backlog: one batch of background entries (an evening's bookings).
      const backlog = await submit(first, {
        resourceType: 'Bundle',
        type: 'batch',
        entry: Array.from({ length: BACKLOG }, (_, i) => ({
          resource: eligibilityRequest({ emiratesId: emiratesId(1980, 5_200_000 + i) }),
          request: { method: 'POST', url: 'CoverageEligibilityRequest/$submit' },
        })),
      });
      expect(backlog.status).toBe(202);
      // Background work takes maxInFlight - deskSlots (2) slots, and no more.
      await until(
        async () => ((await line(store)).background.running === 2 ? true : undefined),
        10_000,
        'two running',
      );
      await first.kill();

      const replicas = [await spawnService(env)];
      if (kind === 'postgres') replicas.push(await spawnService(env));
      for (const replica of replicas) cleanups.push(() => replica.stop());
      const waitingBefore = (await line(store)).background.waiting;
      expect(waitingBefore).toBeGreaterThan(BACKLOG / 2);

      // Two walk-ins at the desk, one to each replica.
      const desk = await Promise.all(
        [0, 1].map((i) =>
          submit(
            replicas[i % replicas.length]!,
            eligibilityRequest({ emiratesId: emiratesId(1981, 5_300_000 + i) }),
          ),
        ),
      );
      const deskIds = desk.map((res) => {
        expect(res.status).toBe(202);
        return String(res.headers['content-location']).split('/').pop() ?? '';
      });
      // Both are sent while most of the backlog still waits (the desk slot, then the next free one).
      await until(
        async () => {
          const checks = await Promise.all(deskIds.map((id) => store.get('t0', id)));
          return checks.every((c) => c?.upstreamTaskId) ? true : undefined;
        },
        30_000,
        'the desk checks sent',
      );
      expect((await line(store)).background.waiting).toBeGreaterThan(0);
      for (const id of deskIds) expect(await store.get('t0', id)).toMatchObject({ queueClass: 'desk' });

      // The backlog drains (never starved), never above maxInFlight at the upstream.
      await until(
        async () => {
          const now = await line(store);
          expect(now.background.running).toBeLessThanOrEqual(MAX_IN_FLIGHT - 1);
          return now.background.waiting === 0 && now.background.running === 0 ? true : undefined;
        },
        90_000,
        'the backlog drained',
      );
      expect(inFlight.maxByClinic.get('clinic-t0') ?? 0).toBeLessThanOrEqual(MAX_IN_FLIGHT);
    },
    150_000,
  );
});
