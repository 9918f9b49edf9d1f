/**
 * Sends mutated $submit requests (test/support/mutations.ts) to a running service over one
 * keep-alive connection pool and judges every answer: never 5xx, always a valid OperationOutcome
 * or CoverageEligibilityResponse, 4xx outcomes name an element, answers small. /health is asked
 * on the same pool between requests, so a connection the server dropped shows up as a failure.
 * Used by test/component/fuzz.test.ts (a few thousand cases) and bench/fuzz.ts (100,000).
 */
import fc from 'fast-check';
import { Pool } from 'undici';
import { OUTCOME_MAX_CHARS } from '../../src/fhir/outcomes.js';
import { validateFhir } from '../../src/fhir/validator.js';
import { fuzzCases, type FuzzCase } from './mutations.js';

/** No answer of the service's own may be larger than this (a rich CER is about 60 KB). */
export const CER_MAX_BYTES = 1024 * 1024;
/** An OperationOutcome's bytes: its characters, each at most 6 bytes as a JSON escape, never needed in practice. */
export const OUTCOME_MAX_BYTES = 2 * OUTCOME_MAX_CHARS;

export interface FuzzReport {
  sent: number;
  byStatus: Record<string, number>;
  failures: string[];
  largest: { bytes: number; label: string; status: number };
  /** The largest error answer (OperationOutcome). */
  largestOutcome: { bytes: number; label: string; status: number };
  slowest: { ms: number; label: string; status: number };
  seconds: number;
}

export interface FuzzOptions {
  url: string;
  authorization: string;
  seed: number;
  runs: number;
  /** Ask /health every this many requests. */
  healthEvery?: number;
  /** Stop at the first failure (the test) or collect them all (the long run). */
  stopOnFailure?: boolean;
  /** Called every `healthEvery` requests with the count sent so far. */
  onProgress?: (sent: number) => void;
}

/** What is wrong with one answer, or null. */
export function judge(status: number, text: string): string | null {
  if (status >= 500) return `status ${status}`;
  let body: { resourceType?: unknown; issue?: { expression?: string[] }[] };
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    return `status ${status}: the answer is not JSON`;
  }
  const bytes = Buffer.byteLength(text);
  if (body.resourceType === 'OperationOutcome') {
    if (status < 400) return `status ${status} with an OperationOutcome`;
    if (bytes > OUTCOME_MAX_BYTES) return `OperationOutcome of ${bytes} bytes`;
    const named = (body.issue ?? []).some((issue) => (issue.expression ?? []).length > 0);
    if ([400, 413, 422].includes(status) && !named) return `status ${status}: no issue.expression`;
  } else if (body.resourceType === 'CoverageEligibilityResponse') {
    if (status !== 200) return `status ${status} with a CoverageEligibilityResponse`;
    if (bytes > CER_MAX_BYTES) return `CER of ${bytes} bytes`;
  } else return `status ${status}: a ${String(body.resourceType)}`;
  const { valid, issues } = validateFhir(body);
  if (!valid) {
    const first = issues.find((i) => i.severity === 'error' || i.severity === 'fatal');
    return `status ${status}: invalid ${String(body.resourceType)} (${first?.expression?.[0] ?? ''}: ${first?.details?.text ?? ''})`;
  }
  return null;
}

/** Runs the seeded cases; resolves with what it saw. Never throws for a bad answer: it reports it. */
export async function runFuzz(options: FuzzOptions): Promise<FuzzReport> {
  const pool = new Pool(options.url, { connections: 4 });
  const report: FuzzReport = {
    sent: 0,
    byStatus: {},
    failures: [],
    largest: { bytes: 0, label: '', status: 0 },
    largestOutcome: { bytes: 0, label: '', status: 0 },
    slowest: { ms: 0, label: '', status: 0 },
    seconds: 0,
  };
  const healthEvery = options.healthEvery ?? 50;
  const started = performance.now();
  const send = async (c: FuzzCase): Promise<boolean> => {
    const t = performance.now();
    let status: number;
    let text: string;
    try {
      const res = await pool.request({
        path: '/fhir/CoverageEligibilityRequest/$submit',
        method: 'POST',
        headers: { authorization: options.authorization, 'content-type': c.contentType, prefer: 'wait=0' },
        body: c.body,
      });
      status = res.statusCode;
      text = await res.body.text();
    } catch (error) {
      report.failures.push(`${c.label}: ${(error as { code?: string }).code ?? String(error)}`);
      return false;
    }
    const ms = performance.now() - t;
    report.sent += 1;
    report.byStatus[status] = (report.byStatus[status] ?? 0) + 1;
    const bytes = Buffer.byteLength(text);
    if (bytes > report.largest.bytes) report.largest = { bytes, label: c.label, status };
    if (status >= 400 && bytes > report.largestOutcome.bytes)
      report.largestOutcome = { bytes, label: c.label, status };
    if (ms > report.slowest.ms) report.slowest = { ms: Math.round(ms * 10) / 10, label: c.label, status };
    const wrong = judge(status, text);
    if (wrong && report.failures.length < 100)
      report.failures.push(`${c.label}: ${wrong}: ${text.slice(0, 300)}`);
    if (report.sent % healthEvery === 0) {
      options.onProgress?.(report.sent);
      try {
        const health = await pool.request({ path: '/health', method: 'GET' });
        await health.body.text();
        if (health.statusCode !== 200) report.failures.push(`/health answered ${health.statusCode}`);
      } catch (error) {
        report.failures.push(`/health: ${(error as { code?: string }).code ?? String(error)}`);
      }
    }
    return wrong === null;
  };
  try {
    await fc.assert(
      fc.asyncProperty(fuzzCases(), async (c) => {
        const ok = await send(c);
        return ok || !options.stopOnFailure;
      }),
      { seed: options.seed, numRuns: options.runs, endOnFailure: true },
    );
  } catch (error) {
    if (report.failures.length === 0) report.failures.push(String(error));
  } finally {
    await pool.close();
  }
  report.seconds = Math.round((performance.now() - started) / 100) / 10;
  return report;
}
