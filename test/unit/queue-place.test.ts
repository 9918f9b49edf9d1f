/**
 * The desk first (docs/queue.md), its pure parts: a check's class, priority and deadline from its
 * request and source; the desk slots of a tenant; what a waiting check says; the tenant field
 * `deskSlots` and BACKGROUND_DEADLINE_MINUTES as the configuration reads them.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, hashApiKey, loadConfig } from '../../src/config.js';
import { deskSlotsOf, priorityOf, queuePlaceOf } from '../../src/mapping/request/queue-place.js';
import { queueWaitOf, waitingNote } from '../../src/mapping/response/queue-wait.js';
import { DEFAULT_TASK_MS, typicalTaskMs } from '../../src/checks/poll-schedule.js';

const NOW = Date.UTC(2026, 0, 5, 6, 0, 0);
const MIN = 60_000;
const SYSTEM = 'http://terminology.hl7.org/CodeSystem/processpriority';
const priority = (code: string, system: string | undefined = SYSTEM) => ({
  priority: { coding: [{ ...(system ? { system } : {}), code }] },
});

describe('queuePlaceOf', () => {
  it('desk for a request for now, background for a batch entry or an appointment; stat and deferred win', () => {
    expect(queuePlaceOf({}, { kind: 'request' }, NOW)).toEqual({
      queueClass: 'desk',
      priority: 'normal',
      queueDeadlineAt: NOW,
    });
    expect(queuePlaceOf(priority('normal'), { kind: 'request' }, NOW).queueClass).toBe('desk');
    expect(queuePlaceOf({}, { kind: 'batch-entry' }, NOW)).toEqual({
      queueClass: 'background',
      priority: 'normal',
      queueDeadlineAt: NOW + 60 * MIN,
    });
    expect(queuePlaceOf({}, { kind: 'batch-entry' }, NOW, 15).queueDeadlineAt).toBe(NOW + 15 * MIN);
    expect(queuePlaceOf({}, { kind: 'appointment', startAt: NOW + 90 * MIN }, NOW)).toEqual({
      queueClass: 'background',
      priority: 'normal',
      queueDeadlineAt: NOW + 90 * MIN,
    });
    expect(queuePlaceOf(priority('stat'), { kind: 'batch-entry' }, NOW)).toEqual({
      queueClass: 'desk',
      priority: 'stat',
      queueDeadlineAt: NOW,
    });
    expect(queuePlaceOf(priority('deferred'), { kind: 'request' }, NOW)).toEqual({
      queueClass: 'background',
      priority: 'deferred',
      queueDeadlineAt: NOW + 60 * MIN,
    });
  });

  it('reads priority from processpriority (or a coding without system), anything else is normal', () => {
    expect(priorityOf(priority('stat', undefined))).toBe('stat');
    expect(priorityOf(priority('stat', 'urn:other'))).toBe('normal');
    expect(priorityOf(priority('urgent'))).toBe('normal');
    expect(priorityOf({})).toBe('normal');
  });
});

describe('deskSlotsOf', () => {
  it('1 when maxInFlight >= 2, else 0; never more than maxInFlight - 1', () => {
    expect(deskSlotsOf(1)).toBe(0);
    expect(deskSlotsOf(2)).toBe(1);
    expect(deskSlotsOf(5)).toBe(1);
    expect(deskSlotsOf(5, 3)).toBe(3);
    expect(deskSlotsOf(5, 9)).toBe(4);
    expect(deskSlotsOf(1, 1)).toBe(0);
  });
});

describe('a waiting check', () => {
  const counts = (desk: number, background: number) => ({
    desk: { running: desk },
    background: { running: background },
  });
  it('says nothing when a slot of its class is free; else the checks ahead and waves of its slots', () => {
    const base = { maxInFlight: 5, deskSlots: 1, taskMs: 60_000 };
    expect(
      queueWaitOf({ ...base, ahead: 0, place: { queueClass: 'desk' }, counts: counts(0, 4) }),
    ).toBeNull();
    // Background work may not take the desk's slot.
    expect(
      queueWaitOf({ ...base, ahead: 0, place: { queueClass: 'background' }, counts: counts(0, 4) }),
    ).toEqual({
      ahead: 0,
      etaMs: 60_000,
    });
    expect(queueWaitOf({ ...base, ahead: 2, place: { queueClass: 'desk' }, counts: counts(1, 4) })).toEqual({
      ahead: 2,
      etaMs: 60_000,
    });
    expect(
      queueWaitOf({ ...base, ahead: 9, place: { queueClass: 'background' }, counts: counts(1, 4) }),
    ).toEqual({
      ahead: 9,
      etaMs: 180_000,
    });
    expect(waitingNote({ ahead: 2, etaMs: 60_000 })).toBe(
      'Waiting to be sent to the payer portal: 2 checks ahead, about 1 min.',
    );
    expect(waitingNote({ ahead: 1, etaMs: 20_000 })).toBe(
      'Waiting to be sent to the payer portal: 1 check ahead, about 1 min.',
    );
    expect(waitingNote({ ahead: 0, etaMs: 7_200_000 })).toBe(
      'Waiting to be sent to the payer portal: next in line, about 2 h.',
    );
  });

  it("takes a task's typical duration from its payer's learned durations (90 s without a history)", () => {
    expect(typicalTaskMs(null)).toBe(DEFAULT_TASK_MS);
    const stats = { n: 10, meanLog: Math.log(40_000), varLog: 0 };
    expect(
      typicalTaskMs({ preExtract: stats, extract: { n: 10, meanLog: Math.log(5_000), varLog: 0 } }),
    ).toBeCloseTo(45_000, -1);
    expect(typicalTaskMs({ preExtract: { ...stats, n: 1 }, extract: null })).toBe(DEFAULT_TASK_MS);
  });
});

describe('configuration', () => {
  const file = (content: unknown): string => {
    const dir = mkdtempSync(join(tmpdir(), 'tenants-'));
    const path = join(dir, 'tenants.json');
    writeFileSync(path, JSON.stringify(content));
    return path;
  };
  const tenant = {
    id: 'clinic-a',
    apiKeys: [`sha256:${hashApiKey('key-a')}`],
    upstream: { apiKey: 'env:CLINIC_A_KEY', clinicId: 'C-001', clientId: 'EHR-1' },
    practiceId: 'P-001',
    maxInFlight: 5,
  };
  const env = { CLINIC_A_KEY: 'k', UPSTREAM_BASE_URL: 'https://u.example/v2/api-integration-v3' };

  it('deskSlots: absent by default, a whole number below maxInFlight, anything else refused', () => {
    expect(
      loadConfig({ ...env, TENANTS_FILE: file({ tenants: [tenant] }) }).tenants[0]?.deskSlots,
    ).toBeUndefined();
    expect(
      loadConfig({ ...env, TENANTS_FILE: file({ tenants: [{ ...tenant, deskSlots: 2 }] }) }).tenants[0]
        ?.deskSlots,
    ).toBe(2);
    for (const bad of [5, 6, -1, 1.5, 'one'])
      expect(
        () => loadConfig({ ...env, TENANTS_FILE: file({ tenants: [{ ...tenant, deskSlots: bad }] }) }),
        String(bad),
      ).toThrow(ConfigError);
  });

  it('BACKGROUND_DEADLINE_MINUTES: 60 by default, a positive number of minutes', () => {
    expect(loadConfig({}).backgroundDeadlineMinutes).toBe(60);
    expect(loadConfig({ BACKGROUND_DEADLINE_MINUTES: '7.5' }).backgroundDeadlineMinutes).toBe(7.5);
    for (const bad of ['0', '-3', 'an hour'])
      expect(() => loadConfig({ BACKGROUND_DEADLINE_MINUTES: bad }), bad).toThrow(ConfigError);
  });
});
