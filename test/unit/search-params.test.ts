/**
 * The search parameters as parsed (src/operations/search/params.ts): date ranges by precision and
 * prefix (search.html#date), tokens and escapes (search.html#token, #escaping), AND and OR.
 */
import { describe, expect, it } from 'vitest';
import type { Tenant } from '../../src/config.js';
import { RESPONSE_PARAMS, dateRange, parseSearch } from '../../src/operations/search/params.js';
import type { FhirRequest } from '../../src/operations/types.js';

function req(query: FhirRequest['query'], prefer?: string): FhirRequest {
  return { params: {}, query, body: undefined, prefer, tenant: { id: 't' } as Tenant, requestId: 'r' };
}

const parse = (query: FhirRequest['query'], prefer?: string) =>
  parseSearch(req(query, prefer), RESPONSE_PARAMS, {
    type: 'CoverageEligibilityResponse',
    include: 'CoverageEligibilityResponse:request',
    sortable: ['lastUpdated', 'created'],
  });

describe('date ranges', () => {
  const day = Date.UTC(2026, 10, 24);
  const nextDay = Date.UTC(2026, 10, 25);
  it('take the range of the precision given', () => {
    expect(dateRange('d', '2026')).toEqual({ from: Date.UTC(2026, 0, 1), before: Date.UTC(2027, 0, 1) });
    expect(dateRange('d', '2026-02')).toEqual({ from: Date.UTC(2026, 1, 1), before: Date.UTC(2026, 2, 1) });
    expect(dateRange('d', '2026-11-24')).toEqual({ from: day, before: nextDay });
    expect(dateRange('d', '2026-11-24T10:00Z')).toEqual({
      from: day + 10 * 3_600_000,
      before: day + 10 * 3_600_000 + 60_000,
    });
    expect(dateRange('d', '2026-11-24T14:00:05+04:00')).toEqual({
      from: day + 10 * 3_600_000 + 5000,
      before: day + 10 * 3_600_000 + 6000,
    });
    expect(dateRange('d', '2026-11-24T10:00:05.250Z')).toEqual({
      from: day + 10 * 3_600_000 + 5250,
      before: day + 10 * 3_600_000 + 5251,
    });
  });

  it('take a fraction of a second at its precision, in whole ms (search.html#date)', () => {
    const s = day + 10 * 3_600_000 + 5000; // 10:00:05Z
    // .9: a tenth of a second, [900, 1000) ms.
    expect(dateRange('d', '2026-11-24T10:00:05.9Z')).toEqual({ from: s + 900, before: s + 1000 });
    expect(dateRange('d', 'eq2026-11-24T10:00:05.9Z')).toEqual({ from: s + 900, before: s + 1000 });
    expect(dateRange('d', 'ne2026-11-24T10:00:05.9Z')).toEqual({
      from: s + 900,
      before: s + 1000,
      not: true,
    });
    expect(dateRange('d', 'gt2026-11-24T10:00:05.9Z')).toEqual({ from: s + 1000 });
    expect(dateRange('d', 'ge2026-11-24T10:00:05.9Z')).toEqual({ from: s + 900 });
    expect(dateRange('d', 'lt2026-11-24T10:00:05.9Z')).toEqual({ before: s + 900 });
    expect(dateRange('d', 'le2026-11-24T10:00:05.9Z')).toEqual({ before: s + 1000 });
    // .98: [980, 990) ms; .980: [980, 981) ms.
    expect(dateRange('d', '2026-11-24T10:00:05.98Z')).toEqual({ from: s + 980, before: s + 990 });
    expect(dateRange('d', '2026-11-24T10:00:05.980Z')).toEqual({ from: s + 980, before: s + 981 });
    // .9809: [980.9, 981.0) ms holds no whole ms: from = ceil(980.9), before = ceil(981.0).
    expect(dateRange('d', '2026-11-24T10:00:05.9809Z')).toEqual({ from: s + 981, before: s + 981 });
    expect(dateRange('d', 'gt2026-11-24T10:00:05.9809Z')).toEqual({ from: s + 981 });
    expect(dateRange('d', 'lt2026-11-24T10:00:05.9809Z')).toEqual({ before: s + 981 });
    // .9805: [980.5, 980.6) ms, none either; .98000: [980, 980.01) holds 980.
    expect(dateRange('d', '2026-11-24T10:00:05.9805Z')).toEqual({ from: s + 981, before: s + 981 });
    expect(dateRange('d', '2026-11-24T10:00:05.98000Z')).toEqual({ from: s + 980, before: s + 981 });
    expect(dateRange('d', '2026-11-24T10:00:05.999999999Z')).toEqual({ from: s + 1000, before: s + 1000 });
  });

  it('apply every prefix to that range', () => {
    expect(dateRange('d', 'eq2026-11-24')).toEqual({ from: day, before: nextDay });
    expect(dateRange('d', 'ne2026-11-24')).toEqual({ from: day, before: nextDay, not: true });
    expect(dateRange('d', 'gt2026-11-24')).toEqual({ from: nextDay });
    expect(dateRange('d', 'sa2026-11-24')).toEqual({ from: nextDay });
    expect(dateRange('d', 'lt2026-11-24')).toEqual({ before: day });
    expect(dateRange('d', 'eb2026-11-24')).toEqual({ before: day });
    expect(dateRange('d', 'ge2026-11-24')).toEqual({ from: day });
    expect(dateRange('d', 'le2026-11-24')).toEqual({ before: nextDay });
    const now = nextDay + 9 * 86_400_000; // ten days after the start of the day
    expect(dateRange('d', 'ap2026-11-24', now)).toEqual({
      from: day - 86_400_000,
      before: nextDay + 86_400_000,
    });
  });

  it('read the years before 100 as they are', () => {
    expect(dateRange('d', '0050')).toEqual({
      from: new Date(0).setUTCFullYear(50, 0, 1),
      before: new Date(0).setUTCFullYear(51, 0, 1),
    });
  });

  it('refuse what is not a FHIR date', () => {
    for (const bad of [
      '2026-02-30',
      '2026-13',
      '2026-11-24T10:00',
      '2026-11-24T25:00Z',
      'xx2026',
      '26-11-24',
      '',
    ])
      expect(() => dateRange('d', bad), bad).toThrow();
  });
});

describe('parseSearch', () => {
  it('ORs comma-separated values and ANDs repetitions', () => {
    const parsed = parse({ outcome: ['complete,error', 'error'], _lastUpdated: ['ge2026', 'lt2027'] });
    expect(parsed.filters.outcome).toEqual([['complete', 'error'], ['error']]);
    expect(parsed.filters.lastUpdated).toEqual([
      { from: Date.UTC(2026, 0, 1) },
      { before: Date.UTC(2027, 0, 1) },
    ]);
  });

  it('reads tokens and escapes', () => {
    const parsed = parse({ patient: 'urn:a|1,2,|3,urn:b|,urn:c|x\\|y,x\\,y' });
    expect(parsed.filters.patient).toEqual([
      [
        { system: 'urn:a', value: '1' },
        { value: '2' },
        { system: '', value: '3' },
        { system: 'urn:b' },
        { system: 'urn:c', value: 'x|y' },
        { value: 'x,y' },
      ],
    ]);
    expect(() => parse({ patient: 'a|b|c' })).toThrow();
    expect(() => parse({ patient: '|' })).toThrow();
  });

  it('clamps _count, and leaves what it ignores out of the self link', () => {
    const parsed = parse({ _count: '100000000', foo: 'bar', patient: '1', _revinclude: 'Task:focus' });
    expect(parsed.count).toBe(100);
    expect(parsed.used.toString()).toBe('patient=1');
    // _summary=text is served (every CER has a narrative): kept in the self link.
    expect(parse({ patient: '1', _summary: 'text' }).used.toString()).toBe('patient=1&_summary=text');
    expect(() => parse({ foo: 'bar' }, 'handling=strict')).toThrow();
    expect(parse({ identifier: 'x' }).matchesNothing).toBe(true);
    // Keys of Object.prototype are no parameters.
    const odd = parse({ constructor: 'x', toString: 'y', __proto__: 'z' });
    expect(odd.filters).toEqual({});
    expect(odd.used.toString()).toBe('');
    expect(() => parse({ constructor: 'x' }, 'handling=strict')).toThrow();
  });
});
