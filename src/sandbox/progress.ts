/**
 * Where a sandbox task stands at a given time: its status moves by time since creation, along the
 * timeline of its scenario, every duration multiplied by timeScale.
 */
import type { Phase, ResultKind, Scenario } from './scenarios.js';
import { RESULT_FLOW, TIMELINES } from './scenarios.js';
import type { SearchAllPlan } from './search-all.js';
import { SEARCH_ALL_PLANS } from './search-all.js';

/** The request as stored and echoed in request_dump. */
export interface StoredRequest extends Record<string, unknown> {
  emirates_id: string;
  id_type: string;
  tpa_name: string;
  name: string;
  user_id: string;
  dob?: string | null;
}

/** A task held by the sandbox. */
export interface SandboxTask {
  recordId: string;
  taskId: string;
  searchId: string;
  tenantId: string;
  clinicId: string;
  createdAtMs: number;
  request: StoredRequest;
  scenario: Scenario;
  /** Single-payer outcome (decided at creation); null on search-all tasks. */
  result: ResultKind | null;
  /** Set when the task was cancelled through the control API. */
  cancelledAtMs: number | null;
  /**
   * Phase durations drawn for this task (durations.ts, with a duration seed), by status; they
   * replace the `standard` and `jump` timelines' fixed ones. Absent: the fixed timelines.
   */
  phaseMs?: Readonly<Record<string, number>>;
}

export interface Progress {
  status: string;
  /** When the current status began (epoch ms). */
  sinceMs: number;
  terminal: boolean;
  /** Whether the task reached EXTRACTING_DATA (interim_results exist from then on). */
  extracted: boolean;
}

/** The search-all plan of a task, or null for a single-payer task. */
export function planOf(task: SandboxTask): SearchAllPlan | null {
  return task.scenario.searchAll ? SEARCH_ALL_PLANS[task.scenario.searchAll] : null;
}

function phasesOf(task: SandboxTask): { phases: readonly Phase[]; terminal: string } {
  const plan = planOf(task);
  if (plan) {
    return {
      phases: [
        { status: 'IN_QUEUE', forMs: 300 },
        { status: 'NAVIGATING_WEBSITE', forMs: plan.finishMs - 300 },
      ],
      terminal: plan.terminal ?? 'PROCESS_COMPLETE',
    };
  }
  const flow = RESULT_FLOW[task.result ?? 'eligible'];
  const timeline = task.scenario.timeline ?? flow.timeline;
  const drawn = task.phaseMs;
  // The spread applies to the ordinary timelines; `slow` and `new-status` keep their fixed times.
  const phases =
    drawn && (timeline === 'standard' || timeline === 'jump')
      ? TIMELINES[timeline].map((phase) => ({ ...phase, forMs: drawn[phase.status] ?? phase.forMs }))
      : TIMELINES[timeline];
  return { phases, terminal: flow.terminal };
}

/** The status of a task at `nowMs`. */
export function progressAt(task: SandboxTask, nowMs: number, timeScale: number): Progress {
  const { phases, terminal } = phasesOf(task);
  let start = task.createdAtMs;
  let extracted = false;
  for (const phase of phases) {
    const end = start + phase.forMs * timeScale;
    if (phase.status === 'EXTRACTING_DATA') extracted = contentTime(task, nowMs) >= start;
    if (task.cancelledAtMs !== null && task.cancelledAtMs < end && task.cancelledAtMs <= nowMs) {
      return { status: 'CANCELLED', sinceMs: Math.max(task.cancelledAtMs, start), terminal: true, extracted };
    }
    if (nowMs < end) return { status: phase.status, sinceMs: start, terminal: false, extracted };
    start = end;
  }
  return { status: terminal, sinceMs: start, terminal: true, extracted };
}

/** The effective "now" for a task's content: a cancelled task stops growing at cancellation. */
export function contentTime(task: SandboxTask, nowMs: number): number {
  return task.cancelledAtMs === null ? nowMs : Math.min(nowMs, task.cancelledAtMs);
}

/** Upstream timestamps: ISO 8601 without zone, microseconds (e.g. 2026-01-05T09:30:00.123000). */
export function upstreamTimestamp(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 23)}000`;
}
