/**
 * The sandbox upstream driven over real HTTP through UpstreamClient, plus the client's typed
 * failures against small misbehaving servers (refused, reset, silent, slow body, bad JSON).
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { IncomingHttpHeaders, Server, ServerResponse } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import type { AddressInfo, Server as NetServer, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UpstreamCredentials, UpstreamResult } from '../../src/upstream/port.js';
import { MAX_ERROR_BODY_BYTES, UpstreamClient, failureFromError } from '../../src/upstream/client.js';
import type { Envelope, UpstreamTaskRequest } from '../../src/upstream/contract.js';
import { isTerminalStatus } from '../../src/upstream/contract.js';
import { BULK_PATHS, DEFAULT_SANDBOX_API_KEYS, SCENARIOS, startSandbox } from '../../src/sandbox/index.js';

const API_KEY = 'component-sandbox-key-51c0e9';
const CREDS: UpstreamCredentials = { apiKey: API_KEY, clinicId: 'C-001', clientId: 'EHR-1' };
/** The same credentials as raw headers, for calls made without the client. */
const AUTH_HEADERS = { 'x-api-key': API_KEY, 'X-Clinic-ID': 'C-001', 'X-Client-ID': 'EHR-1' };
/** At 0.1 a standard check takes 300 ms: IN_QUEUE 40, NAVIGATING_WEBSITE 160, EXTRACTING_DATA 100. */
const SCALE = 0.1;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function taskRequest(identifier: string, overrides: Partial<UpstreamTaskRequest> = {}): UpstreamTaskRequest {
  return {
    emirates_id: identifier,
    id_type: 'EMIRATESID',
    phone: '+971500000000',
    practice_id: 'P-001',
    tpa_name: 'DAMAN',
    payerName: 'Daman',
    visit_type: 'OUTPATIENT',
    name: 'Sandbox Patient',
    doctorName: 'Dr Sandbox',
    doctorId: 'DHA-P-0012345',
    user_id: 'ehr-user-1',
    dob: '1990-01-01',
    extra_args: { title: 'Consultation', value: 'consultation', request_start_time: 1_767_605_400 },
    ...overrides,
  };
}

/** The parts of a GET /task-status answer these tests read. */
interface TaskStatusView {
  status: string;
  search_all_status?: string;
  aggregated_results?: unknown[];
  eligibility_result?: { data?: { data?: { is_eligible?: unknown } } };
}

/** GET /task-status/{task_id}, read raw (the client only implements the main flow). */
async function taskStatus(taskId: string): Promise<TaskStatusView> {
  const res = await fetch(`${sandbox.url}/task-status/${taskId}`, {
    headers: AUTH_HEADERS,
  });
  expect(res.status).toBe(200);
  return (await res.json()) as TaskStatusView;
}

function unwrap<T>(result: UpstreamResult<T>): T {
  if (!result.ok) throw new Error(`upstream failure: ${JSON.stringify(result.error)}`);
  return result.value;
}

let sandbox: Awaited<ReturnType<typeof startSandbox>>;
let client: UpstreamClient;

beforeAll(async () => {
  sandbox = await startSandbox({ port: 0, timeScale: SCALE, apiKeys: [API_KEY] });
  client = new UpstreamClient({ baseUrl: sandbox.url, requestTimeoutMs: 5000 });
});

afterAll(async () => {
  await client.close();
  await sandbox.close();
});

async function create(identifier: string, overrides: Partial<UpstreamTaskRequest> = {}): Promise<string> {
  return unwrap(await client.createTask(CREDS, taskRequest(identifier, overrides))).task_id;
}

/** Polls until a terminal status (or until `until` holds); returns every envelope read. */
async function pollAll(
  taskId: string,
  options: { intervalMs?: number; until?: (e: Envelope) => boolean; creds?: UpstreamCredentials } = {},
): Promise<Envelope[]> {
  const seen: Envelope[] = [];
  const until = options.until ?? ((e: Envelope) => isTerminalStatus(e.status));
  for (let i = 0; i < 500; i += 1) {
    const envelope = unwrap(await client.getResult(options.creds ?? CREDS, taskId));
    seen.push(envelope);
    if (until(envelope)) return seen;
    await sleep(options.intervalMs ?? 5);
  }
  throw new Error('task did not finish');
}

function statusesOf(envelopes: Envelope[]): string[] {
  return envelopes.map((e) => e.status).filter((s, i, all) => all[i - 1] !== s);
}

async function runToEnd(identifier: string, overrides: Partial<UpstreamTaskRequest> = {}) {
  const envelopes = await pollAll(await create(identifier, overrides), { intervalMs: 10 });
  const last = envelopes.at(-1)!;
  return { envelopes, last, statuses: statusesOf(envelopes), result: last.eligibility_result };
}

describe('sandbox: health and authentication', () => {
  it('answers /health without headers, with a timestamp without zone', async () => {
    const health = unwrap(await client.health()) as { status: string; timestamp: string };
    expect(health.status).toBe('ok');
    expect(health.timestamp).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}$/);
  });

  it('answers a wrong x-api-key with a typed http 401 that does not echo the key', async () => {
    const wrong = { ...CREDS, apiKey: 'wrong-key-1234' };
    const result = await client.createTask(wrong, taskRequest('784-1990-0000001-0'));
    expect(result).toMatchObject({ ok: false, error: { kind: 'http', status: 401 } });
    expect(JSON.stringify(result)).not.toContain('wrong-key-1234');
    expect(await client.getResult(wrong, 'any')).toMatchObject({
      ok: false,
      error: { kind: 'http', status: 401 },
    });
  });

  it.each([['X-Clinic-ID'], ['X-Client-ID'], ['x-api-key']])(
    'answers 401 JSON when %s is missing',
    async (missing) => {
      const headers: Record<string, string> = { ...AUTH_HEADERS };
      delete headers[missing];
      const res = await fetch(`${sandbox.url}/eligibility-result/x`, { headers });
      expect(res.status).toBe(401);
      expect(res.headers.get('content-type')).toContain('application/json');
    },
  );

  it('answers 422 JSON to a create-task body missing required fields or not JSON', async () => {
    const partial = {
      ...taskRequest('784-1990-0000001-0'),
      emirates_id: undefined,
    } as unknown as UpstreamTaskRequest;
    const result = await client.createTask(CREDS, partial);
    expect(result).toMatchObject({ ok: false, error: { kind: 'http', status: 422 } });
    const res = await fetch(`${sandbox.url}/create-task`, {
      method: 'POST',
      headers: { ...AUTH_HEADERS, 'content-type': 'application/json' },
      body: '{not json',
    });
    expect(res.status).toBe(422);
  });

  it('answers 404 for a task of another clinic', async () => {
    const taskId = await create('784-1990-0000001-0');
    const other = await client.getResult({ ...CREDS, clinicId: 'C-OTHER' }, taskId);
    expect(other).toMatchObject({ ok: false, error: { kind: 'http', status: 404 } });
    expect((await client.getResult(CREDS, taskId)).ok).toBe(true);
  });

  it.each(BULK_PATHS)('answers 503 on the bulk endpoint %s', async (path) => {
    const res = await fetch(`${sandbox.url}${path}`, {
      method: 'POST',
      headers: { ...AUTH_HEADERS, 'content-type': 'application/json' },
      body: '[]',
    });
    expect(res.status).toBe(503);
  });
});

describe('sandbox: a single-payer task', () => {
  it('moves IN_QUEUE -> NAVIGATING_WEBSITE -> EXTRACTING_DATA -> PROCESS_COMPLETE', async () => {
    const { envelopes, statuses, result } = await runToEnd('784-1990-0000001-0');
    expect(statuses).toEqual(['IN_QUEUE', 'NAVIGATING_WEBSITE', 'EXTRACTING_DATA', 'PROCESS_COMPLETE']);
    for (const e of envelopes.filter((x) => !isTerminalStatus(x.status)))
      expect(e.eligibility_result).toBeUndefined();
    for (const e of envelopes.filter((x) => x.status === 'NAVIGATING_WEBSITE'))
      expect(e.interim_results).toBeNull();
    const extracting = envelopes.find((x) => x.status === 'EXTRACTING_DATA')!;
    expect(extracting.interim_results?.screenshot_key).toMatch(/\/sandbox-files\//);
    expect(extracting.interim_results?.referral_documents?.length).toBeGreaterThan(0);
    expect(result?.status).toBe('found');
    expect(result?.id).toBe(`${envelopes[0]!.task_id}:DAMAN`);
    expect(result?.created_at).toMatch(/^\d{4}-\d{2}-\d{2}T[\d:.]+$/);
    expect(envelopes[0]!.request_dump?.emirates_id).toBe('784-1990-0000001-0');
  });

  it('returns the rich eligible data of the document', async () => {
    const { result } = await runToEnd('784-1990-0000001-0');
    const data = result?.data_dump?.data;
    expect(data?.is_eligible).toBe(true);
    expect(data?.policy_network?.is_gatekeeper).toBe('Yes');
    expect(data?.policy_network?.all_networks?.length).toBeGreaterThan(1);
    const percentages = data?.copay_analysis?.copay_details?.map((d) => d.copay_percentage);
    expect(percentages).toEqual(expect.arrayContaining(['20%', '12.5']));
    expect(data?.copay_analysis?.copay_details?.some((d) => d.coverage_status === 'Not Covered')).toBe(true);
    expect(data?.copay_analysis?.copay_details?.some((d) => d.cost_sharing)).toBe(true);
    expect(data?.copay_analysis?.new_version_of_copay_analysis?.benefits?.length).toBeGreaterThan(0);
    expect(data?.copay_details_to_fill?.map((c) => c.name)).toEqual(['Outpatient', 'Maternity']);
    for (const entry of data?.copay_details_to_fill ?? []) {
      expect(Object.keys(entry.values_to_fill ?? {}).sort()).toEqual(
        [
          'CONSULTATION',
          'LAB',
          'RADIOLOGY',
          'PROCEDURE',
          'DIAGNOSTICS',
          'DENTAL CONSULTATION & PROCEDURE',
          'MEDICINES',
          'PHYSIOTHERAPY',
          'OPTICAL',
        ].sort(),
      );
    }
    expect(data?.warning_messages?.some((w) => w.message_type === 'information')).toBe(true);
    expect(data?.warning_messages?.some((w) => w.message_type === undefined)).toBe(true);
    expect(data?.referral_documents?.length).toBeGreaterThan(0);
    expect(data?.screenshot_key).toMatch(/sig=/);
  });

  it.each([
    ['invalid_credentials', '784-1990-0000004-4'],
    ['backoff', '784-1990-0000007-7'],
    ['tpa_not_configured', '784-1990-0000008-5'],
  ])(
    'jumps from NAVIGATING_WEBSITE to the end, skipping EXTRACTING_DATA, on %s',
    async (outcome, identifier) => {
      const { statuses, envelopes, result } = await runToEnd(identifier);
      expect(statuses).toEqual(['IN_QUEUE', 'NAVIGATING_WEBSITE', 'PROCESS_COMPLETE']);
      expect(envelopes.at(-1)?.interim_results).toBeNull();
      expect(result?.status).toBe(outcome);
    },
  );
});

describe('sandbox: outcome scenarios', () => {
  it('found, not eligible: a determination with failure_reason', async () => {
    const { result } = await runToEnd('784-1990-0000002-8');
    expect(result?.status).toBe('found');
    expect(result?.data_dump?.data?.is_eligible).toBe(false);
    expect(result?.data_dump?.data?.failure_reason).toEqual(expect.any(String));
  });

  it('member_not_found: show_data false, is_eligible false', async () => {
    const { result } = await runToEnd('784-1990-0000003-6');
    expect(result?.status).toBe('member_not_found');
    expect(result?.data_dump?.data).toMatchObject({ show_data: false, is_eligible: false });
  });

  it.each([
    ['invalid_credentials', '784-1990-0000004-4'],
    ['failed', '784-1990-0000005-1'],
    ['error', '784-1990-0000006-9'],
    ['backoff', '784-1990-0000007-7'],
  ])('%s carries error_type and message and no data_dump.data', async (outcome, identifier) => {
    const { result, last } = await runToEnd(identifier);
    expect(last.status).toBe('PROCESS_COMPLETE');
    expect(result?.status).toBe(outcome);
    expect(result?.error_type).toEqual(expect.any(String));
    expect(result?.message).toEqual(expect.any(String));
    expect(result?.data_dump?.data).toBeUndefined();
  });

  it('tpa_not_configured: is_eligible null', async () => {
    const { result } = await runToEnd('784-1990-0000008-5');
    expect(result?.status).toBe('tpa_not_configured');
    expect(result?.data_dump?.data?.is_eligible).toBeNull();
  });

  it('payer code NOCREDS: tpa_not_configured for an unlisted identifier', async () => {
    const { result } = await runToEnd('784-1985-7654321-3', { tpa_name: 'NOCREDS' });
    expect(result?.status).toBe('tpa_not_configured');
  });

  it('multi-card: card 2 of 3 with its card number, package and network', async () => {
    const { result, last } = await runToEnd('784-1990-0000009-3');
    expect(result?.id).toBe(`${last.task_id}:DAMAN:card2`);
    expect(result?.data_dump?.data).toMatchObject({
      card_index: 2,
      multi_card_total: 3,
      card_number: expect.any(String),
      package_name: expect.any(String),
      card_network: expect.any(String),
    });
    expect(result?.data_dump?.data).not.toHaveProperty('is_multi_card');
  });

  it('top-level FAILED with an eligibility_result to inspect', async () => {
    const { last, result } = await runToEnd('784-1990-0000010-1');
    expect(last.status).toBe('FAILED');
    expect(result).toMatchObject({ status: 'error', error_type: 'TASK_FAILED' });
  });

  it('top-level CANCELLED with no result', async () => {
    const { last } = await runToEnd('784-1990-0000011-9');
    expect(last.status).toBe('CANCELLED');
    expect(last.eligibility_result).toBeUndefined();
  });

  it('passes through an in-flight status never seen before', async () => {
    const { statuses, result } = await runToEnd('784-1990-0000013-5');
    expect(statuses).toContain('VERIFYING_MEMBER');
    expect(statuses.at(-1)).toBe('PROCESS_COMPLETE');
    expect(result?.status).toBe('found');
  });

  it('failed the first time, found when the same identifier and payer are checked again', async () => {
    const first = await runToEnd('784-1990-0000014-3');
    expect(first.result?.status).toBe('failed');
    const second = await runToEnd('784-1990-0000014-3');
    expect(second.result?.status).toBe('found');
    expect(second.result?.data_dump?.data?.is_eligible).toBe(true);
  });

  it('member_not_found by Emirates ID, found by card number', async () => {
    const byId = await runToEnd('784-1990-0000020-0');
    expect(byId.result?.status).toBe('member_not_found');
    const byCard = await runToEnd('4410-0000-0000020', { id_type: 'CARDNUMBER' });
    expect(byCard.result?.status).toBe('found');
    expect(byCard.result?.data_dump?.data?.is_eligible).toBe(true);
  });

  it('an unlisted identifier is found eligible', async () => {
    const { result } = await runToEnd('784-1990-1234567-6');
    expect(result?.status).toBe('found');
    expect(result?.data_dump?.data?.is_eligible).toBe(true);
  });

  it('the slow scenario stays NAVIGATING_WEBSITE, and a cancel through control ends it as CANCELLED', async () => {
    const taskId = await create('784-1990-0000012-7');
    await sleep(400);
    expect(unwrap(await client.getResult(CREDS, taskId)).status).toBe('NAVIGATING_WEBSITE');
    expect(sandbox.control.cancel(taskId)).toBe(true);
    const envelope = unwrap(await client.getResult(CREDS, taskId));
    expect(envelope.status).toBe('CANCELLED');
    expect(envelope.eligibility_result).toBeUndefined();
    expect(sandbox.control.cancel(taskId)).toBe(false);
  });
});

describe('sandbox: signed links', () => {
  async function completedEnvelope(): Promise<Envelope> {
    return (await runToEnd('784-1990-0000001-0')).last;
  }

  it('re-signs every link on every read, and the links serve a file', async () => {
    const envelope = await completedEnvelope();
    await sleep(5);
    const again = unwrap(await client.getResult(CREDS, envelope.task_id));
    const screenshot = envelope.eligibility_result?.data_dump?.data?.screenshot_key;
    const doc = envelope.eligibility_result?.data_dump?.data?.referral_documents?.[0]?.s3_url;
    expect(again.eligibility_result?.data_dump?.data?.screenshot_key).not.toBe(screenshot);
    expect(again.eligibility_result?.data_dump?.data?.referral_documents?.[0]?.s3_url).not.toBe(doc);
    const png = await fetch(screenshot!);
    expect(png.status).toBe(200);
    expect(png.headers.get('content-type')).toContain('image/png');
    const pdf = await fetch(doc!);
    expect(pdf.status).toBe(200);
    expect(pdf.headers.get('content-type')).toContain('application/pdf');
    expect(
      Buffer.from(await pdf.arrayBuffer())
        .subarray(0, 5)
        .toString('latin1'),
    ).toBe('%PDF-');
  });

  it('refuses a forged signature or a moved expiry with 403', async () => {
    const link = new URL((await completedEnvelope()).eligibility_result!.data_dump!.data!.screenshot_key!);
    const forged = new URL(link);
    forged.searchParams.set('sig', '0'.repeat(32));
    expect((await fetch(forged)).status).toBe(403);
    const moved = new URL(link);
    moved.searchParams.set('expires', String(Number(link.searchParams.get('expires')) + 60_000));
    expect((await fetch(moved)).status).toBe(403);
  });

  it('refuses an expired link with 403; reading the task again gives a working one', async () => {
    const envelope = await completedEnvelope();
    sandbox.control.setLinkTtlMs(20);
    try {
      const stale = unwrap(await client.getResult(CREDS, envelope.task_id)).eligibility_result!.data_dump!
        .data!.screenshot_key!;
      await sleep(50);
      expect((await fetch(stale)).status).toBe(403);
    } finally {
      sandbox.control.setLinkTtlMs(60_000);
    }
    const fresh = unwrap(await client.getResult(CREDS, envelope.task_id)).eligibility_result!.data_dump!.data!
      .screenshot_key!;
    expect((await fetch(fresh)).status).toBe(200);
  });
});

describe('sandbox: search-all', () => {
  const searchAll = { tpa_name: 'ALL', payerName: '', is_search_all: true };

  it('grows aggregated_results, completes at 17 answers while the task is still in flight', async () => {
    const taskId = await create('784-1990-0000031-7', searchAll);
    const envelopes = await pollAll(taskId, {
      intervalMs: 10,
      until: (e) => e.search_all_status === 'SEARCH_ALL_COMPLETE',
    });
    const counts = envelopes.map((e) => Number(e.total_tpas_checked));
    expect(new Set(counts).size).toBeGreaterThan(3);
    expect(counts).toEqual([...counts].sort((a, b) => a - b));
    for (const e of envelopes) {
      expect(e.is_search_all).toBe(true);
      expect(e.eligibility_result).toBeUndefined();
      expect(e.total_tpas_checked).toBe(e.aggregated_results?.length);
    }
    const done = envelopes.at(-1)!;
    expect(done.aggregated_results!.length).toBeGreaterThanOrEqual(17);
    expect(isTerminalStatus(done.status)).toBe(false);
    const eligible = done.aggregated_results!.filter(
      (r) => (r.status === 'found' || r.status === 'member_found') && r.data?.is_eligible === true,
    );
    expect(eligible.map((r) => r.tpa_name).sort()).toEqual(['DAMAN', 'THIQA']);
    const finished = await pollAll(taskId, { intervalMs: 20 });
    expect(finished.at(-1)?.status).toBe('PROCESS_COMPLETE');
  });

  it('none found: complete with no found entry', async () => {
    const taskId = await create('784-1990-0000032-5', searchAll);
    const last = (await pollAll(taskId, { intervalMs: 20 })).at(-1)!;
    expect(last.search_all_status).toBe('SEARCH_ALL_COMPLETE');
    expect(last.aggregated_results?.some((r) => r.status === 'found' || r.status === 'member_found')).toBe(
      false,
    );
  });

  it('one found among member_not_found answers', async () => {
    const taskId = await create('784-1990-0000033-3', searchAll);
    const last = (await pollAll(taskId, { intervalMs: 20 })).at(-1)!;
    expect(last.search_all_status).toBe('SEARCH_ALL_COMPLETE');
    const found = last.aggregated_results?.filter((r) => r.status === 'found');
    expect(found?.map((r) => r.tpa_name)).toEqual(['NEXTCARE']);
    expect(last.aggregated_results?.filter((r) => r.status === 'member_not_found').length).toBeGreaterThan(
      10,
    );
    for (const r of last.aggregated_results ?? []) expect(r.created_at).toEqual(expect.any(String));
  });

  it('a single aggregator answer completes the search once the check finishes', async () => {
    const taskId = await create('784-1990-0000035-8', searchAll);
    const envelopes = await pollAll(taskId, { intervalMs: 10 });
    const oneAnswerInFlight = envelopes.find(
      (e) => e.total_tpas_checked === 1 && !isTerminalStatus(e.status),
    );
    expect(oneAnswerInFlight?.search_all_status).toBe('SEARCH_ALL_PROCESSING');
    expect(envelopes.at(-1)?.search_all_status).toBe('SEARCH_ALL_COMPLETE');
  });

  it('task-status keeps the answer without the internal key and waits for 22', async () => {
    const taskId = await create('784-1990-0000031-7', searchAll);
    await pollAll(taskId, { intervalMs: 20 });
    const view = await taskStatus(taskId);
    expect(view.status).toBe('COMPLETE');
    expect(view.aggregated_results).toHaveLength(19);
    expect(view.search_all_status).toBe('SEARCH_ALL_PROCESSING');
  });
});

describe('sandbox: task-status', () => {
  it('reports PROCESSING then COMPLETE with the parsed result at eligibility_result.data', async () => {
    const taskId = await create('784-1990-0000001-0');
    const early = await taskStatus(taskId);
    expect(early.status).toBe('PROCESSING');
    await pollAll(taskId, { intervalMs: 20 });
    const view = await taskStatus(taskId);
    expect(view.status).toBe('COMPLETE');
    expect(view).not.toHaveProperty('interim_results');
    expect(view.eligibility_result?.data?.data?.is_eligible).toBe(true);
  });
});

describe('sandbox: control and fault injection', () => {
  it('counts create-task calls and polls, and lists tasks by scenario without patient data', async () => {
    const before = sandbox.control.stats();
    const taskId = await create('784-1990-0000003-6');
    await client.getResult(CREDS, taskId);
    const after = sandbox.control.stats();
    expect(after.createTask - before.createTask).toBe(1);
    expect(after.tasksCreated - before.tasksCreated).toBe(1);
    expect(after.polls - before.polls).toBe(1);
    const listed = sandbox.control.tasks().find((t) => t.taskId === taskId);
    expect(listed).toMatchObject({ scenario: 'member-not-found', clinicId: 'C-001' });
    // An Emirates ID's shape, not its prefix: a random task UUID may hold "784-" (one run in ~30 did).
    expect(JSON.stringify(sandbox.control.tasks())).not.toMatch(/784-?\d{4}-?\d{7}-?\d/);
  });

  it('answers polls with typed http 5xx failures at the configured rate', async () => {
    const taskId = await create('784-1990-0000001-0');
    sandbox.control.setFaults({ pollErrorRate: 1 });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 3; i += 1) {
        const result = await client.getResult(CREDS, taskId);
        expect(result.ok).toBe(false);
        if (!result.ok && result.error.kind === 'http') statuses.push(result.error.status);
      }
      expect(statuses.sort()).toEqual([500, 502, 503]);
      sandbox.control.setFaults({ pollErrorRate: 0.5 });
      const half = await Promise.all([0, 1, 2, 3].map(() => client.getResult(CREDS, taskId)));
      expect(half.filter((r) => !r.ok)).toHaveLength(2);
    } finally {
      sandbox.control.setFaults({ pollErrorRate: 0 });
    }
    expect((await client.getResult(CREDS, taskId)).ok).toBe(true);
  });

  it('delays answers by latencyMs, which a short client timeout reports as timeout', async () => {
    // undici checks headers timeouts on a coarse (~1 s) timer, so the latency is well above that.
    sandbox.control.setFaults({ latencyMs: 2500 });
    const impatient = new UpstreamClient({ baseUrl: sandbox.url, requestTimeoutMs: 200 });
    try {
      expect(await impatient.health()).toEqual({ ok: false, error: { kind: 'timeout', phase: 'headers' } });
    } finally {
      sandbox.control.setFaults({ latencyMs: 0 });
      await impatient.close();
    }
  });

  it('delays only create-task answers by createTaskLatencyMs, with the task already created', async () => {
    sandbox.control.setFaults({ createTaskLatencyMs: 600 });
    try {
      const before = sandbox.control.tasks().length;
      const started = Date.now();
      const creating = client.createTask(CREDS, taskRequest('784-1990-0000001-0'));
      await sleep(150);
      // The task exists upstream while its id is still on its way.
      expect(sandbox.control.tasks()).toHaveLength(before + 1);
      expect((await client.health()).ok).toBe(true);
      expect(Date.now() - started).toBeLessThan(550);
      unwrap(await creating);
      expect(Date.now() - started).toBeGreaterThanOrEqual(590);
    } finally {
      sandbox.control.setFaults({ createTaskLatencyMs: 0 });
    }
  });

  it('reset forgets tasks and counters', async () => {
    const other = await startSandbox({ port: 0, timeScale: SCALE, apiKeys: [API_KEY] });
    const c = new UpstreamClient({ baseUrl: other.url });
    try {
      unwrap(await c.createTask(CREDS, taskRequest('784-1990-0000001-0')));
      expect(other.control.tasks()).toHaveLength(1);
      other.control.reset();
      expect(other.control.tasks()).toHaveLength(0);
      expect(other.control.stats().createTask).toBe(0);
    } finally {
      await c.close();
      await other.close();
    }
  });
});

describe('sandbox: defaults and docs', () => {
  it('accepts the built-in sandbox keys when started without apiKeys', async () => {
    const plain = await startSandbox({ port: 0, timeScale: SCALE });
    const c = new UpstreamClient({ baseUrl: plain.url });
    try {
      expect(plain.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v2\/api-integration-v3$/);
      // The keys docs/sandbox.md documents (an empty list would make the loop below prove nothing).
      expect(DEFAULT_SANDBOX_API_KEYS).toEqual(['sandbox', 'sandbox-upstream-key']);
      for (const apiKey of DEFAULT_SANDBOX_API_KEYS) {
        expect((await c.createTask({ ...CREDS, apiKey }, taskRequest('784-1990-0000001-0'))).ok).toBe(true);
      }
    } finally {
      await c.close();
      await plain.close();
    }
  });

  it('docs/sandbox.md lists every scenario with its identifier', () => {
    const doc = readFileSync(new URL('../../docs/sandbox.md', import.meta.url), 'utf8');
    expect(SCENARIOS.length).toBeGreaterThan(20);
    for (const scenario of SCENARIOS) {
      expect(doc, scenario.name).toContain(`| ${scenario.name} `);
      if (scenario.serial) expect(doc, scenario.name).toContain(`\`${scenario.example}\``);
    }
  });
});

/** A throwaway HTTP server recording what it received. */
async function recordingServer(
  answer: (res: ServerResponse) => void,
): Promise<{ url: string; seen: { url: string; headers: IncomingHttpHeaders }[]; server: Server }> {
  const seen: { url: string; headers: IncomingHttpHeaders }[] = [];
  const server = createServer((req, res) => {
    seen.push({ url: req.url ?? '', headers: req.headers });
    req.resume();
    req.on('end', () => answer(res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/v2/api-integration-v3`, seen, server };
}

/** A raw TCP server doing `onSocket` with each connection. */
async function tcpServer(onSocket: (socket: Socket) => void): Promise<{ url: string; server: NetServer }> {
  const server = createNetServer(onSocket);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/v2/api-integration-v3`, server };
}

function closeServer(server: Server | NetServer): Promise<void> {
  if ('closeAllConnections' in server) server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

describe('UpstreamClient: requests and typed failures', () => {
  it('sends the three auth headers on create-task and none on health; encodes task ids', async () => {
    const rec = await recordingServer((res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"task_id":"t-1"}'),
    );
    const c = new UpstreamClient({ baseUrl: rec.url });
    try {
      await c.createTask(CREDS, taskRequest('784-1990-0000001-0'));
      await c.health();
      await c.getResult(CREDS, 'a/b?c d');
      expect(rec.seen[0]?.headers).toMatchObject({
        'x-api-key': API_KEY,
        'x-clinic-id': 'C-001',
        'x-client-id': 'EHR-1',
      });
      expect(rec.seen[0]?.url).toBe('/v2/api-integration-v3/create-task');
      expect(rec.seen[1]?.url).toBe('/v2/api-integration-v3/health');
      expect(rec.seen[1]?.headers).not.toHaveProperty('x-api-key');
      expect(rec.seen[1]?.headers).not.toHaveProperty('x-clinic-id');
      expect(rec.seen[2]?.url).toBe('/v2/api-integration-v3/eligibility-result/a%2Fb%3Fc%20d');
    } finally {
      await c.close();
      await closeServer(rec.server);
    }
  });

  it('returns http failures with the body truncated to 2 KB and the API key scrubbed', async () => {
    const rec = await recordingServer((res) =>
      res.writeHead(500, { 'content-type': 'text/plain' }).end(`key was ${API_KEY} ${'x'.repeat(5000)}`),
    );
    const c = new UpstreamClient({ baseUrl: rec.url });
    try {
      const result = await c.getResult(CREDS, 't-1');
      expect(result).toMatchObject({ ok: false, error: { kind: 'http', status: 500 } });
      const body = !result.ok && result.error.kind === 'http' ? (result.error.body ?? '') : '';
      expect(Buffer.byteLength(body)).toBeLessThanOrEqual(MAX_ERROR_BODY_BYTES);
      expect(body).toContain('[redacted]');
      expect(JSON.stringify(result)).not.toContain(API_KEY);
    } finally {
      await c.close();
      await closeServer(rec.server);
    }
  });

  it('scrubs the API key from a 2xx answer that echoes it (an error message quoting it never reaches a CER)', async () => {
    const envelope = {
      task_id: 't-1',
      status: 'PROCESS_COMPLETE',
      eligibility_result: {
        status: 'invalid_credentials',
        message: `key ${API_KEY} rejected for clinic C-001`,
      },
    };
    const rec = await recordingServer((res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(envelope)),
    );
    const c = new UpstreamClient({ baseUrl: rec.url });
    try {
      const result = await c.getResult(CREDS, 't-1');
      expect(result.ok).toBe(true);
      expect(JSON.stringify(result)).not.toContain(API_KEY);
      expect(result.ok && result.value.eligibility_result?.message).toBe(
        'key [redacted] rejected for clinic C-001',
      );
    } finally {
      await c.close();
      await closeServer(rec.server);
    }
  });

  it.each([
    ['not JSON', 'this is not json'],
    ['JSON failing the envelope schema', '{"status":"PROCESS_COMPLETE"}'],
    [
      'is_eligible as a string',
      '{"task_id":"t","status":"PROCESS_COMPLETE","eligibility_result":{"status":"found","data_dump":{"data":{"is_eligible":"true"}}}}',
    ],
  ])('returns invalid-body for a 2xx that is %s', async (_what, text) => {
    const rec = await recordingServer((res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(text),
    );
    const c = new UpstreamClient({ baseUrl: rec.url });
    try {
      const result = await c.getResult(CREDS, 't');
      expect(result).toMatchObject({ ok: false, error: { kind: 'invalid-body' } });
      expect(JSON.stringify(result)).not.toContain(API_KEY);
    } finally {
      await c.close();
      await closeServer(rec.server);
    }
  });

  it('returns invalid-body for a create-task answer without task_id', async () => {
    const rec = await recordingServer((res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"id":"x"}'),
    );
    const c = new UpstreamClient({ baseUrl: rec.url });
    try {
      expect(await c.createTask(CREDS, taskRequest('784-1990-0000001-0'))).toMatchObject({
        ok: false,
        error: { kind: 'invalid-body' },
      });
    } finally {
      await c.close();
      await closeServer(rec.server);
    }
  });

  it('returns network with sentRequest false when the connection is refused (closed port)', async () => {
    const { url, server } = await tcpServer((s) => s.destroy());
    await closeServer(server);
    const c = new UpstreamClient({ baseUrl: url });
    try {
      const result = await c.createTask(CREDS, taskRequest('784-1990-0000001-0'));
      expect(result).toEqual({
        ok: false,
        error: { kind: 'network', code: 'ECONNREFUSED', sentRequest: false },
      });
    } finally {
      await c.close();
    }
  });

  it.each([
    ['closes', (s: Socket) => s.destroy()],
    ['resets', (s: Socket) => s.resetAndDestroy()],
  ])(
    'returns network with sentRequest true when the server accepts then %s the socket',
    async (_how, end) => {
      const { url, server } = await tcpServer((socket) => socket.once('data', () => end(socket)));
      const c = new UpstreamClient({ baseUrl: url });
      try {
        const result = await c.createTask(CREDS, taskRequest('784-1990-0000001-0'));
        expect(result).toMatchObject({ ok: false, error: { kind: 'network', sentRequest: true } });
        expect(JSON.stringify(result)).not.toContain(API_KEY);
      } finally {
        await c.close();
        await closeServer(server);
      }
    },
  );

  it('returns timeout when the server never answers', async () => {
    const sockets: Socket[] = [];
    const { url, server } = await tcpServer((socket) => {
      sockets.push(socket);
      socket.resume();
    });
    const c = new UpstreamClient({ baseUrl: url, requestTimeoutMs: 150 });
    try {
      expect(await c.getResult(CREDS, 't')).toEqual({
        ok: false,
        error: { kind: 'timeout', phase: 'headers' },
      });
    } finally {
      await c.close();
      for (const s of sockets) s.destroy();
      await closeServer(server);
    }
  });

  it('returns timeout when the body stalls after the headers', async () => {
    const rec = await recordingServer((res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"task_id":');
    });
    const c = new UpstreamClient({ baseUrl: rec.url, requestTimeoutMs: 150 });
    try {
      expect(await c.getResult(CREDS, 't')).toEqual({ ok: false, error: { kind: 'timeout', phase: 'body' } });
    } finally {
      await c.close();
      await closeServer(rec.server);
    }
  });

  it.each([
    ['ECONNREFUSED', false],
    ['ENOTFOUND', false],
    ['EAI_AGAIN', false],
    ['UND_ERR_CONNECT_TIMEOUT', false],
    ['ECONNRESET', true],
    ['UND_ERR_SOCKET', true],
    ['EPIPE', true],
  ])('maps error code %s to network with sentRequest %s', (code, sentRequest) => {
    expect(failureFromError(Object.assign(new Error('x'), { code }))).toEqual({
      kind: 'network',
      code,
      sentRequest,
    });
  });

  it('finds the code inside an AggregateError (several addresses refused)', () => {
    const err = new AggregateError([Object.assign(new Error('a'), { code: 'ECONNREFUSED' })], 'all failed');
    expect(failureFromError(err)).toEqual({ kind: 'network', code: 'ECONNREFUSED', sentRequest: false });
  });

  it('treats an error without a code as possibly sent', () => {
    expect(failureFromError(new Error('boom'))).toEqual({
      kind: 'network',
      code: 'UNKNOWN',
      sentRequest: true,
    });
  });
});
