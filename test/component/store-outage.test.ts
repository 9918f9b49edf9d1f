/**
 * The store can fail (issue 29, "Done when"): the real service as a child process on a PostgreSQL
 * server of this test's own, stopped as an operator or a failover does (`pg_ctl stop -m fast`)
 * and as a crash does (`-m immediate`), at three moments: while checks are submitted, while
 * create-task calls are out, and while checks are polled. Throughout: the process stays up, every
 * answer while the store is away is a 503 with Retry-After and an OperationOutcome or a stored
 * check's CER, /ready follows the store, the log says it a few times (not once a round), and at
 * the end every check has the upstream's outcome, with one create-task call per check.
 * test/component/store-full-disk.test.ts is the same on SQLite with a full disk.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import type { Answer, Drill, OutageReport } from '../support/outage-drill.js';
import { counter, outage, startDrill, stoppedServer, untilTasks } from '../support/outage-drill.js';
import { expectAllEligible, expectOutageKept } from '../support/outage-expect.js';
import type { PrivatePostgres } from '../support/private-postgres.js';
import { startPrivatePostgres } from '../support/private-postgres.js';

let server: PrivatePostgres;
const drills: Drill[] = [];
beforeAll(async () => {
  server = await startPrivatePostgres();
});
afterAll(async () => {
  for (const drill of drills) await drill.close();
  await server?.close();
});

async function drillOn(database: string, options: Omit<Parameters<typeof startDrill>[0], 'databaseUrl'>) {
  const drill = await startDrill({ databaseUrl: await server.createDatabase(database), ...options });
  drills.push(drill);
  return drill;
}

describe('store outage drill on PostgreSQL', () => {
  it('a create-task answered while the store is down keeps its task id: the checks end eligible and the next check is not held back (stop -m fast)', async () => {
    const drill = await drillOn('drill_create_task', {
      timeScale: 1,
      createTaskLatencyMs: 4000,
      tenants: 1,
      maxInFlight: 3,
      env: { LEASE_MS: '15000', CHECK_TIMEOUT_MS: '60000' },
    });
    for (let n = 0; n < 3; n += 1) expect((await drill.submit(n, 'respond-async')).status).toBe(202);
    // Three create-task calls out: the tasks exist upstream, their ids come back in 4 s.
    await untilTasks(drill, 3);
    const report = await outage(drill, {
      name: 'create-task out (fast)',
      store: stoppedServer(server, 'fast'),
      downMs: 8000,
      submitEveryMs: 2000,
      nextN: counter(3),
    });
    expect(drill.sandbox.control.stats().createTask, 'create-task calls during the outage').toBe(3);
    // A check after the outage finds the tenant's three slots free again.
    await drill.submit(100);
    await expectAllEligible(drill, 40_000);
    expectOutageKept(report, { createTasksOut: 3 });
  }, 120_000);

  it('while submitting: every $submit answers 503 with Retry-After, and one already waiting answers its queued CER with Location (stop -m immediate)', async () => {
    const drill = await drillOn('drill_submitting', { timeScale: 3, tenants: 2, maxInFlight: 10 });
    const waiting: Promise<Answer>[] = [0, 1, 2, 3].map((n) => drill.submit(n, 'wait=20'));
    await untilTasks(drill, 4);
    const report = await outage(drill, {
      name: 'submitting (immediate)',
      store: stoppedServer(server, 'immediate'),
      downMs: 6000,
      submitEveryMs: 400,
      nextN: counter(4),
    });
    for (const answer of await Promise.all(waiting)) {
      expect.soft(answer.status, `waiting $submit: ${JSON.stringify(answer.body).slice(0, 300)}`).toBe(200);
      expect
        .soft(answer.location ?? '(none)', 'waiting $submit: Location')
        .toMatch(/\/fhir\/CoverageEligibilityResponse\//);
      if (answer.status === 200) expectValidFhir(answer.body);
    }
    const duringOutage = report.answers.filter((a) => a.what === 'submit');
    expect(duringOutage.length).toBeGreaterThanOrEqual(10);
    expect.soft(duringOutage.map((a) => a.status)).toEqual(duringOutage.map(() => 503));
    await expectAllEligible(drill, 40_000);
    expectOutageKept(report);
  }, 120_000);

  it('while polling, two outages (stop -m fast, then -m immediate): reads and _async answer 503 with Retry-After, /ready follows the store, the checks end eligible', async () => {
    const drill = await drillOn('drill_polling', { timeScale: 8, tenants: 2, maxInFlight: 10 });
    for (let n = 0; n < 10; n += 1) expect((await drill.submit(n, 'respond-async')).status).toBe(202);
    await untilTasks(drill, 10);
    const reports: OutageReport[] = [];
    for (const mode of ['fast', 'immediate'] as const) {
      reports.push(
        await outage(drill, {
          name: `polling (${mode})`,
          store: stoppedServer(server, mode),
          downMs: 5000,
          probeEveryMs: 300,
        }),
      );
    }
    for (const report of reports) {
      const reads = report.answers.filter((a) => a.what === 'read' || a.what === 'async');
      expect.soft(reads.length, `${report.name}: reads asked`).toBeGreaterThanOrEqual(10);
      expectOutageKept(report);
    }
    expect(drill.sandbox.control.stats().createTask).toBe(10);
    await expectAllEligible(drill, 40_000);
  }, 120_000);
});
