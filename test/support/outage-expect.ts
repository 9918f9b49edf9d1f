/**
 * The assertions of the store-outage drills (issue 29), shared by the PostgreSQL and the SQLite
 * full-disk tests: expect.soft throughout, so that a failing drill lists everything it broke.
 */
import { expect } from 'vitest';
import { expectValidFhir } from './fhir.js';
import { UPSTREAM_KEY } from './harness.js';
import type { Drill, OutageReport } from './outage-drill.js';
import { answerProblems, drillEmiratesId } from './outage-drill.js';

/**
 * A loop's two lines of an outage (FailureStreak): once when the store goes, once when it is back.
 * Each loop (scheduler, check step, delivery, pre-visit, evidence, audit, ...) may say each once;
 * a loop that said it every round (every 100 ms: 50-100 lines) is what the drill catches. Their
 * total grows with the number of loops, so it is not bounded as a sum: a loop added later (and
 * under load every loop meets the outage) is no regression.
 */
const LOOP_LINE = /^warn: .+ (failed: the store is unavailable; backing off until it is back|works again)$/;

/**
 * Other warn and error lines one outage may cause beyond one per create-task answer held (a line
 * per check, bounded by the create-task calls out).
 */
export const MAX_OTHER_LOG_LINES_PER_OUTAGE = 4;

/** Asserts the contract of the answers given while the store was away (expect.soft: all are listed). */
export function expectOutageKept(
  report: OutageReport,
  options: { readyDownFrom?: number; createTasksOut?: number } = {},
): void {
  expect.soft(report.crash, `${report.name}: the process is up`).toEqual([]);
  expect.soft(report.alive, `${report.name}: the process is up`).toBe(true);
  const problems = answerProblems(report.answers, options.readyDownFrom);
  expect.soft(problems, `${report.name}: answers while the store was away`).toEqual({});
  // Every FHIR body given meanwhile is valid FHIR R4 (what is not FHIR JSON is a problem above).
  for (const answer of report.answers) {
    const body = answer.body as { resourceType?: unknown } | null;
    if (answer.what !== 'health' && answer.what !== 'ready' && typeof body?.resourceType === 'string')
      expectValidFhir(body);
  }
  const kinds = new Set(report.answers.map((a) => a.what));
  expect
    .soft([...kinds].sort(), `${report.name}: what was asked`)
    .toEqual(expect.arrayContaining(['health', 'metrics', 'ready']));
  expect.soft(report.readyAfterUpMs, `${report.name}: /ready 200 once the store is back`).not.toBeNull();
  const lines = Object.entries(report.logLines.byMessage);
  const loopLines = lines.filter(([message]) => LOOP_LINE.test(message));
  expect
    .soft(
      loopLines.filter(([, count]) => count > 1),
      `${report.name}: a loop says once that the store went and once that it is back`,
    )
    .toEqual([]);
  const others = lines.filter(([message]) => !LOOP_LINE.test(message)).reduce((sum, [, n]) => sum + n, 0);
  expect
    .soft(others, `${report.name}: ${JSON.stringify(report.logLines.byMessage)}`)
    .toBeLessThanOrEqual(MAX_OTHER_LOG_LINES_PER_OUTAGE + (options.createTasksOut ?? 0));
  const downSeconds = (report.upAt - report.downAt) / 1000;
  expect
    .soft(report.metrics.maxSecondsSinceWritable, `${report.name}: store_seconds_since_writable`)
    .toBeGreaterThanOrEqual(downSeconds / 2);
  expect
    .soft(report.metrics.storeErrorsAfter, `${report.name}: store_errors_total`)
    .toBeGreaterThan(report.metrics.storeErrorsBefore);
}

/** Asserts that every check the drill asked for is stored and ended with the upstream's outcome. */
export async function expectAllEligible(drill: Drill, timeoutMs: number): Promise<void> {
  await drill.resubmitRefused();
  const final = await drill.settle(timeoutMs);
  const outcomes = drill.submissions.map((s) => (s.id ? (final.get(s.id) ?? 'still queued') : 'not stored'));
  expect
    .soft(outcomes, 'every check ends found eligible')
    .toEqual(drill.submissions.map(() => ({ outcome: 'complete', inforce: true, code: '' })));
  const distinct = new Set(drill.submissions.map((s) => s.id).filter(Boolean)).size;
  expect.soft(distinct, 'one stored check per request identifier').toBe(drill.submissions.length);
  expect.soft(drill.sandbox.control.stats().createTask, 'create-task calls = distinct checks').toBe(distinct);
  expectNothingPrivateLogged(drill);
}

/**
 * No patient data and no secret in the service's output through the outages (the new warn lines
 * carry check and task ids only): the checks' Emirates IDs (as sent and digits only), the
 * demographics of test/support/requests.ts, the upstream and inbound keys, the database password.
 */
export function expectNothingPrivateLogged(drill: Drill): void {
  const ids = drill.submissions.map((s) => drillEmiratesId(s.n));
  const tenants = new Set(drill.submissions.map((s) => s.tenant));
  const password = new URL(drill.databaseUrl.replace(/^sqlite:.*/, 'sqlite://x')).password;
  const forbidden = [
    ...ids,
    ...ids.map((id) => id.replace(/\D/g, '')),
    'Aisha',
    'Testpatient',
    '971501112233',
    '1988-04-12',
    UPSTREAM_KEY,
    ...[...tenants].map((t) => `key-t${t}-0123456789`),
    ...(password ? [password] : []),
  ];
  const text = drill.service.output.join('\n');
  const found = forbidden.filter((value) => text.includes(value));
  expect.soft(found, 'patient data or secrets in the log').toEqual([]);
}
