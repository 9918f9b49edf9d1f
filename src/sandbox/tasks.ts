/**
 * The sandbox's in-memory state: tasks (scoped by clinic), per-identifier create counts (for the
 * "failed first time then found" scenario), call counters and the injected faults.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { SandboxTask, StoredRequest } from './progress.js';
import { progressAt } from './progress.js';
import { SEARCH_ALL_PAYER, resolveScenario } from './scenarios.js';
import { taskPhaseDurations } from './durations.js';

/** Body of POST /create-task as the sandbox checks it (UpstreamTaskRequest, envelope.ts). */
export const taskRequestSchema = z
  .looseObject({
    emirates_id: z.string().min(1),
    id_type: z.string().min(1),
    phone: z.string(),
    practice_id: z.string().min(1),
    tpa_name: z.string().min(1),
    payerName: z.string(),
    visit_type: z.string().min(1),
    // May be empty, as payerName: a check by Emirates ID or card number needs no name (the front-desk page sends one only when typed).
    name: z.string(),
    doctorName: z.string(),
    doctorId: z.string().optional(),
    user_id: z.string().min(1),
    dob: z.string().nullable().optional(),
    mode: z.string().optional(),
    test_mode: z.boolean().optional(),
    is_search_all: z.boolean().optional(),
    extra_args: z.looseObject({
      title: z.string(),
      value: z.string(),
      is_pod: z.boolean().optional(),
      is_maternity: z.boolean().optional(),
      not_related_to_chief_complaint: z.boolean().optional(),
      free_followup_or_extended_followup: z.boolean().optional(),
      request_start_time: z.number(),
    }),
  })
  // A search-all is asked with tpa_name ALL and is_search_all true, both (README assumption).
  .refine((r) => (r.tpa_name === SEARCH_ALL_PAYER) === (r.is_search_all === true), {
    message: 'a search-all needs both tpa_name ALL and is_search_all true',
    path: ['is_search_all'],
  });

export interface Faults {
  /** Fraction (0..1) of polls answered 500/502/503. */
  pollErrorRate: number;
  /** Delay added to every answer, ms. */
  latencyMs: number;
  /**
   * Delay of create-task's answer only, ms, after the task is created: the portal session has
   * started and its id is on its way (drills hold the answer while the adapter's store is down).
   */
  createTaskLatencyMs?: number;
}

export interface SandboxStats {
  /** POST /create-task calls that passed auth (including 422s). */
  createTask: number;
  /** Tasks created. */
  tasksCreated: number;
  /** GET /eligibility-result calls that passed auth (including injected errors). */
  polls: number;
  /** GET /task-status calls that passed auth. */
  taskStatus: number;
  /** Polls answered with an injected 5xx. */
  injectedErrors: number;
}

/** What tests see of a task (no patient data). */
export interface SandboxTaskInfo {
  taskId: string;
  clinicId: string;
  scenario: string;
  status: string;
  searchAll: boolean;
  createdAt: string;
  /** When the task reached its terminal status (ISO, ms); null while in flight. */
  endedAt: string | null;
}

const INJECTED_STATUSES = [500, 502, 503] as const;

export class TaskBook {
  private readonly tasks = new Map<string, SandboxTask>();
  private readonly createCounts = new Map<string, number>();
  private counters: SandboxStats = {
    createTask: 0,
    tasksCreated: 0,
    polls: 0,
    taskStatus: 0,
    injectedErrors: 0,
  };
  private faultCredit = 0;
  faults: Faults;

  constructor(
    private readonly timeScale: number,
    private readonly initialFaults: Faults,
    /** Seed of the spread of durations per payer (durations.ts); undefined: fixed timelines. */
    private readonly durationSeed?: number,
  ) {
    this.faults = { ...initialFaults };
  }

  /** Creates a task; the scenario and, for single-payer tasks, the outcome are fixed now. */
  create(clinicId: string, request: StoredRequest, nowMs: number): SandboxTask {
    const searchAll = request.is_search_all === true;
    const scenario = resolveScenario({ ...request, searchAll });
    const countKey = [clinicId, request.id_type, request.emirates_id, request.tpa_name].join('\u0000');
    const count = this.createCounts.get(countKey) ?? 0;
    this.createCounts.set(countKey, count + 1);
    const results = scenario.results ?? [];
    const task: SandboxTask = {
      recordId: randomUUID(),
      taskId: randomUUID(),
      searchId: randomUUID(),
      tenantId: 'sandbox-tenant',
      clinicId,
      createdAtMs: nowMs,
      request,
      scenario,
      result: searchAll ? null : (results[Math.min(count, results.length - 1)] ?? 'eligible'),
      cancelledAtMs: null,
      ...(this.durationSeed !== undefined && !searchAll
        ? {
            phaseMs: taskPhaseDurations(
              this.durationSeed,
              request.tpa_name.trim().toUpperCase(),
              [request.id_type, request.emirates_id, count].join('\u0000'),
            ),
          }
        : {}),
    };
    this.tasks.set(task.taskId, task);
    this.counters.tasksCreated += 1;
    return task;
  }

  /** The task, only for the clinic that created it. */
  get(clinicId: string, taskId: string): SandboxTask | undefined {
    const task = this.tasks.get(taskId);
    return task && task.clinicId === clinicId ? task : undefined;
  }

  count(what: 'createTask' | 'polls' | 'taskStatus'): void {
    this.counters[what] += 1;
  }

  /** The status of an injected poll failure, or null to answer normally. Deterministic: a credit accumulates. */
  injectedPollError(): number | null {
    if (this.faults.pollErrorRate <= 0) return null;
    this.faultCredit += Math.min(1, this.faults.pollErrorRate);
    if (this.faultCredit < 1 - 1e-9) return null;
    this.faultCredit -= 1;
    const status = INJECTED_STATUSES[this.counters.injectedErrors % INJECTED_STATUSES.length] ?? 503;
    this.counters.injectedErrors += 1;
    return status;
  }

  stats(): SandboxStats {
    return { ...this.counters };
  }

  list(nowMs: number): SandboxTaskInfo[] {
    return [...this.tasks.values()].map((t) => {
      const progress = progressAt(t, nowMs, this.timeScale);
      return {
        taskId: t.taskId,
        clinicId: t.clinicId,
        scenario: t.scenario.name,
        status: progress.status,
        searchAll: t.scenario.searchAll !== undefined,
        createdAt: new Date(t.createdAtMs).toISOString(),
        endedAt: progress.terminal ? new Date(progress.sinceMs).toISOString() : null,
      };
    });
  }

  /** Cancels a task still in flight. False when unknown or already terminal. */
  cancel(taskId: string, nowMs: number): boolean {
    const task = this.tasks.get(taskId);
    if (!task || progressAt(task, nowMs, this.timeScale).terminal) return false;
    task.cancelledAtMs = nowMs;
    return true;
  }

  /**
   * Forgets one task, as the upstream does after its own (unpublished) retention: get-result then
   * answers 404. Links it signed before still work until they expire. False when unknown.
   */
  forget(taskId: string): boolean {
    return this.tasks.delete(taskId);
  }

  /** Forgets every task, count and fault. */
  reset(): void {
    this.tasks.clear();
    this.createCounts.clear();
    this.counters = { createTask: 0, tasksCreated: 0, polls: 0, taskStatus: 0, injectedErrors: 0 };
    this.faultCredit = 0;
    this.faults = { ...this.initialFaults };
  }
}
