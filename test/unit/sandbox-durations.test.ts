/** The sandbox's seeded spread of durations per payer (src/sandbox/durations.ts). */
import { describe, expect, it } from 'vitest';
import { payerProfile, taskPhaseDurations } from '../../src/sandbox/durations.js';
import { PAYERS } from '../../src/sandbox/scenarios.js';
import { progressAt } from '../../src/sandbox/progress.js';
import type { SandboxTask } from '../../src/sandbox/progress.js';
import { resolveScenario } from '../../src/sandbox/scenarios.js';

describe('sandbox durations', () => {
  it('gives each payer its own profile within the documented ranges, the same for the same seed', () => {
    const profiles = Object.keys(PAYERS).map((payer) => payerProfile(1, payer));
    for (const p of profiles) {
      expect(p.queueMs).toBeGreaterThanOrEqual(500);
      expect(p.queueMs).toBeLessThanOrEqual(2500);
      expect(p.navigateMs).toBeGreaterThanOrEqual(20_000);
      expect(p.navigateMs).toBeLessThanOrEqual(60_000);
      expect(p.extractMs).toBeGreaterThanOrEqual(3000);
      expect(p.extractMs).toBeLessThanOrEqual(9000);
      expect(p.sigma).toBeGreaterThanOrEqual(0.15);
      expect(p.sigma).toBeLessThanOrEqual(0.35);
    }
    expect(new Set(profiles.map((p) => p.navigateMs)).size).toBeGreaterThan(10);
    expect(payerProfile(1, 'DAMAN')).toEqual(payerProfile(1, 'DAMAN'));
    expect(payerProfile(2, 'DAMAN')).not.toEqual(payerProfile(1, 'DAMAN'));
  });

  it('spreads a payer’s tasks around its medians, deterministically per task', () => {
    const profile = payerProfile(3, 'AXA');
    const navigation = Array.from(
      { length: 400 },
      (_, i) => taskPhaseDurations(3, 'AXA', `task-${i}`).NAVIGATING_WEBSITE!,
    );
    expect(taskPhaseDurations(3, 'AXA', 'task-7')).toEqual(taskPhaseDurations(3, 'AXA', 'task-7'));
    const logs = navigation.map(Math.log);
    const mean = logs.reduce((a, b) => a + b, 0) / logs.length;
    const sd = Math.sqrt(logs.reduce((a, b) => a + (b - mean) ** 2, 0) / logs.length);
    expect(Math.exp(mean) / profile.navigateMs).toBeGreaterThan(0.95);
    expect(Math.exp(mean) / profile.navigateMs).toBeLessThan(1.05);
    expect(sd).toBeGreaterThan(profile.sigma * 0.85);
    expect(sd).toBeLessThan(profile.sigma * 1.15);
  });

  it('a task with drawn durations moves through them, times timeScale; without, the fixed timeline', () => {
    const request = {
      emirates_id: '784-1990-1234567-6',
      id_type: 'EMIRATESID',
      tpa_name: 'AXA',
      name: 'x',
      user_id: 'u',
    };
    const base: SandboxTask = {
      recordId: 'r',
      taskId: 't',
      searchId: 's',
      tenantId: 'sandbox-tenant',
      clinicId: 'c',
      createdAtMs: 0,
      request,
      scenario: resolveScenario({ ...request, searchAll: false }),
      result: 'eligible',
      cancelledAtMs: null,
    };
    const phaseMs = { IN_QUEUE: 1000, NAVIGATING_WEBSITE: 30_000, EXTRACTING_DATA: 5000 };
    const drawn = { ...base, phaseMs };
    expect(progressAt(drawn, 500 * 0.1, 0.1).status).toBe('IN_QUEUE');
    expect(progressAt(drawn, 30_000 * 0.1, 0.1).status).toBe('NAVIGATING_WEBSITE');
    expect(progressAt(drawn, 31_500 * 0.1, 0.1)).toMatchObject({
      status: 'EXTRACTING_DATA',
      sinceMs: 31_000 * 0.1,
    });
    expect(progressAt(drawn, 36_000 * 0.1, 0.1)).toMatchObject({
      status: 'PROCESS_COMPLETE',
      sinceMs: 36_000 * 0.1,
    });
    // The fixed standard timeline: done after 3 s.
    expect(progressAt(base, 3000 * 0.1, 0.1).status).toBe('PROCESS_COMPLETE');
  });
});
