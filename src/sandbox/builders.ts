/**
 * Builders of the sandbox's answers: the task envelope of GET /eligibility-result/{task_id} and
 * the narrower view of GET /task-status/{task_id} (docs/upstream.md). Pure functions of the task,
 * the time and a link signer, so test fixtures are generated from them and cannot drift.
 */
import type { Signer } from './links.js';
import type { PayloadContext } from './payloads.js';
import {
  MULTI_CARD,
  foundData,
  memberNotFoundData,
  notConfiguredData,
  referralDocuments,
  screenshotKey,
} from './payloads.js';
import type { Progress, SandboxTask } from './progress.js';
import { contentTime, planOf, progressAt, upstreamTimestamp } from './progress.js';
import type { ResultKind } from './scenarios.js';
import { ERROR_OUTCOMES } from './scenarios.js';
import type { Responder, SearchAllPlan } from './search-all.js';

/** Time and link signing for one read. */
export interface BuildClock {
  nowMs: number;
  timeScale: number;
  /** A signer whose links are issued at the given time. */
  signer: (issuedAtMs: number) => Signer;
}

type Json = Record<string, unknown>;

/** Search-all completion threshold on eligibility-result, and on task-status (docs/upstream.md, Concurrency and rates). */
export const SEARCH_ALL_THRESHOLD = 17;
export const TASK_STATUS_SEARCH_ALL_THRESHOLD = 22;

const FOUND_STATUSES = new Set(['found', 'member_found']);

function context(task: SandboxTask, payer: string, sign: Signer): PayloadContext {
  return {
    taskId: task.taskId,
    payer,
    request: task.request,
    year: new Date(task.createdAtMs).getUTCFullYear(),
    sign,
  };
}

/** [outcome status, data] of the single-payer outcomes that carry a data block. */
const DATA_OUTCOMES: Partial<Record<ResultKind, (ctx: PayloadContext) => [string, Json]>> = {
  eligible: (ctx) => ['found', foundData(ctx, { eligible: true })],
  'not-eligible': (ctx) => [
    'found',
    foundData(ctx, {
      eligible: false,
      failureReason: 'Policy lapsed: the policy ended before the visit date',
    }),
  ],
  'multi-card': (ctx) => ['found', foundData(ctx, { eligible: true, card: MULTI_CARD })],
  'member-not-found': (ctx) => ['member_not_found', memberNotFoundData(ctx)],
  'tpa-not-configured': (ctx) => ['tpa_not_configured', notConfiguredData(ctx)],
};

/** The outcome of a single-payer task: status plus data_dump, or error_type and message. */
function outcome(task: SandboxTask, kind: ResultKind, sign: Signer): Json {
  const payer = task.request.tpa_name;
  const failure = ERROR_OUTCOMES[kind];
  if (failure) {
    // `failed` keeps a data_dump without data; the other three carry none (both occur upstream).
    const dump = kind === 'failed' ? { data_dump: { status: failure.status, tpa: payer } } : {};
    return { ...dump, status: failure.status, error_type: failure.error_type, message: failure.message };
  }
  const build = DATA_OUTCOMES[kind];
  if (!build) return { status: kind };
  const [status, data] = build(context(task, payer, sign));
  return { data_dump: { status, tpa: payer, data }, status };
}

function eligibilityResult(task: SandboxTask, kind: ResultKind, resultAtMs: number, sign: Signer): Json {
  const payer = task.request.tpa_name;
  const card = kind === 'multi-card' ? `:card${MULTI_CARD.index}` : '';
  const { status, ...rest } = outcome(task, kind, sign);
  return {
    id: `${task.taskId}:${payer}${card}`,
    tenant_id: task.tenantId,
    clinic_id: task.clinicId,
    created_at: upstreamTimestamp(resultAtMs),
    updated_at: upstreamTimestamp(resultAtMs),
    ...('data_dump' in rest ? { data_dump: rest.data_dump } : {}),
    search_id: task.searchId,
    tpa_name: payer,
    task_id: task.taskId,
    user_id: task.request.user_id,
    status,
    ...('error_type' in rest ? { error_type: rest.error_type, message: rest.message } : {}),
  };
}

function responderEntry(task: SandboxTask, responder: Responder, timeScale: number, sign: Signer): Json {
  const ctx = context(task, responder.payer, sign);
  const base = {
    status: responder.status,
    created_at: upstreamTimestamp(task.createdAtMs + responder.atMs * timeScale),
    tpa_name: responder.payer,
  };
  switch (responder.status) {
    case 'found':
    case 'member_found':
      return { ...base, data: foundData(ctx, { eligible: responder.isEligible ?? true }) };
    case 'member_not_found':
      return {
        ...base,
        data: { ...memberNotFoundData(ctx), was_identified_by_aggregator: responder.aggregator ?? false },
      };
    case 'tpa_not_configured':
      return { ...base, data: notConfiguredData(ctx) };
    case 'invalid_credentials':
    case 'failed': {
      const failure = ERROR_OUTCOMES[responder.status === 'failed' ? 'failed' : 'invalid-credentials'];
      return { ...base, data: null, error_type: failure?.error_type, message: failure?.message };
    }
  }
}

interface SearchAllView {
  entries: Json[];
  complete: boolean;
}

/**
 * The answers received so far and whether the search is complete. eligibility-result omits answers
 * missing the internal payer key and completes at 17; task-status keeps them and needs 22.
 */
function searchAllView(
  task: SandboxTask,
  plan: SearchAllPlan,
  progress: Progress,
  clock: BuildClock,
  sign: Signer,
  view: 'result' | 'task-status',
): SearchAllView {
  const at = contentTime(task, clock.nowMs);
  const answered = plan.responders.filter(
    (r) =>
      task.createdAtMs + r.atMs * clock.timeScale <= at &&
      (view === 'task-status' || r.hasInternalKey !== false),
  );
  const threshold = view === 'result' ? SEARCH_ALL_THRESHOLD : TASK_STATUS_SEARCH_ALL_THRESHOLD;
  const finished = progress.terminal && progress.status !== 'CANCELLED';
  const complete =
    answered.length >= threshold ||
    (answered.length > 0 && answered.every((r) => FOUND_STATUSES.has(r.status))) ||
    (answered.length === 1 && answered[0]?.aggregator === true && finished);
  return { entries: answered.map((r) => responderEntry(task, r, clock.timeScale, sign)), complete };
}

/** The outcome a task shows now: only once terminal, and never on a cancelled task. */
function shownResult(task: SandboxTask, progress: Progress): ResultKind | null {
  return progress.terminal && progress.status !== 'CANCELLED' ? task.result : null;
}

function envelopeHead(task: SandboxTask, progress: Progress): Json {
  return {
    id: task.recordId,
    tenant_id: task.tenantId,
    clinic_id: task.clinicId,
    created_at: upstreamTimestamp(task.createdAtMs),
    updated_at: upstreamTimestamp(progress.sinceMs),
    task_id: task.taskId,
    status: progress.status,
    request_dump: task.request,
  };
}

/** The task envelope, as GET /eligibility-result/{task_id} answers it. Links are signed now. */
export function buildEnvelope(task: SandboxTask, clock: BuildClock): Json {
  const progress = progressAt(task, clock.nowMs, clock.timeScale);
  const sign = clock.signer(clock.nowMs);
  const plan = planOf(task);
  if (plan) {
    const view = searchAllView(task, plan, progress, clock, sign, 'result');
    return {
      ...envelopeHead(task, progress),
      is_search_all: true,
      search_all_status: view.complete ? 'SEARCH_ALL_COMPLETE' : 'SEARCH_ALL_PROCESSING',
      created_by_user_id: task.request.user_id,
      aggregated_results: view.entries,
      total_tpas_checked: view.entries.length,
    };
  }
  const interim = progress.extracted
    ? {
        referral_documents: referralDocuments({ taskId: task.taskId, sign }),
        screenshot_key: screenshotKey({ taskId: task.taskId, sign }),
        tpa_name: task.request.tpa_name,
      }
    : null;
  const result = shownResult(task, progress);
  return {
    ...envelopeHead(task, progress),
    interim_results: interim,
    is_search_all: false,
    search_all_status: null,
    created_by_user_id: task.request.user_id,
    ...(result ? { eligibility_result: eligibilityResult(task, result, progress.sinceMs, sign) } : {}),
  };
}

/** task-status vocabulary: PROCESSING, COMPLETE, FAILED, CANCELLED. */
function narrowStatus(progress: Progress): string {
  if (!progress.terminal) return 'PROCESSING';
  return progress.status === 'PROCESS_COMPLETE' ? 'COMPLETE' : progress.status;
}

/**
 * The narrower view of GET /task-status/{task_id}: the parsed result at eligibility_result.data,
 * links as stored when the result was produced (so possibly expired), no interim_results.
 */
export function buildTaskStatus(task: SandboxTask, clock: BuildClock): Json {
  const progress = progressAt(task, clock.nowMs, clock.timeScale);
  const sign = clock.signer(progress.terminal ? progress.sinceMs : task.createdAtMs);
  const head = {
    task_id: task.taskId,
    status: narrowStatus(progress),
    created_at: upstreamTimestamp(task.createdAtMs),
    updated_at: upstreamTimestamp(progress.sinceMs),
  };
  const plan = planOf(task);
  if (plan) {
    const view = searchAllView(task, plan, progress, clock, sign, 'task-status');
    return {
      ...head,
      is_search_all: true,
      search_all_status: view.complete ? 'SEARCH_ALL_COMPLETE' : 'SEARCH_ALL_PROCESSING',
      aggregated_results: view.entries,
      total_tpas_checked: view.entries.length,
    };
  }
  const result = shownResult(task, progress);
  if (!result) return { ...head, is_search_all: false, eligibility_result: null };
  const full = eligibilityResult(task, result, progress.sinceMs, sign);
  return {
    ...head,
    is_search_all: false,
    eligibility_result: {
      status: full.status,
      tpa_name: full.tpa_name,
      data: full.data_dump ?? null,
      ...('error_type' in full ? { error_type: full.error_type, message: full.message } : {}),
    },
  };
}
