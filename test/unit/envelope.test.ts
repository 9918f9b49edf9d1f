import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  createTaskAnswerSchema,
  envelopeSchema,
  isTerminalStatus,
  parseLooseNumber,
  parsePercent,
} from '../../src/upstream/contract.js';
import { FIXTURE_DIR, buildFixtures, fixtureText } from '../fixtures/upstream/generate.js';

const files = readdirSync(FIXTURE_DIR).filter((f) => f.endsWith('.json'));

function fixture(name: string): unknown {
  return JSON.parse(readFileSync(join(FIXTURE_DIR, `${name}.json`), 'utf8'));
}

/** Marks a key to delete in `edited`. */
const DELETE = Symbol('delete');
type Path = (string | number)[];

/** A copy of a fixture with the value at each path replaced (or deleted). */
function edited(name: string, ...edits: [Path, unknown][]): unknown {
  const copy = fixture(name);
  for (const [path, value] of edits) {
    let node = copy as Record<string | number, unknown>;
    for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
    const last = path.at(-1)!;
    if (value === DELETE) delete node[last];
    else node[last] = value;
  }
  return copy;
}

const DATA: Path = ['eligibility_result', 'data_dump', 'data'];

describe('upstream fixtures', () => {
  it('are exactly what the sandbox builders produce (regenerate with tsx test/fixtures/upstream/generate.ts)', () => {
    const built = buildFixtures();
    expect(files.map((f) => f.slice(0, -'.json'.length)).sort()).toEqual(Object.keys(built).sort());
    for (const [name, value] of Object.entries(built)) {
      expect(readFileSync(join(FIXTURE_DIR, `${name}.json`), 'utf8'), name).toBe(fixtureText(value));
    }
  });

  it.each(files)('%s parses with envelopeSchema', (file) => {
    const result = envelopeSchema.safeParse(JSON.parse(readFileSync(join(FIXTURE_DIR, file), 'utf8')));
    expect(result.success, JSON.stringify(result.error?.issues)).toBe(true);
  });

  it('cover every outcome and shape the upstream document lists', () => {
    const envelopes = files.map((f) => envelopeSchema.parse(fixture(f.slice(0, -'.json'.length))));
    const outcomes = new Set(
      envelopes.map((e) => e.eligibility_result?.status).filter((s) => s !== undefined),
    );
    expect([...outcomes].sort()).toEqual(
      [
        'backoff',
        'error',
        'failed',
        'found',
        'invalid_credentials',
        'member_not_found',
        'tpa_not_configured',
      ].sort(),
    );
    const statuses = new Set(envelopes.map((e) => e.status));
    for (const s of [
      'IN_QUEUE',
      'NAVIGATING_WEBSITE',
      'EXTRACTING_DATA',
      'VERIFYING_MEMBER',
      'PROCESS_COMPLETE',
    ]) {
      expect(statuses).toContain(s);
    }
    expect(statuses).toContain('FAILED');
    expect(statuses).toContain('CANCELLED');
  });
});

describe('envelopeSchema, tolerant where the upstream varies', () => {
  it('accepts an in-flight status never seen before and treats it as not terminal', () => {
    const parsed = envelopeSchema.parse(fixture('in-flight-unknown-status'));
    expect(parsed.status).toBe('VERIFYING_MEMBER');
    expect(isTerminalStatus(parsed.status)).toBe(false);
  });

  it('keeps copay_percentage given as "20%" and "12.5" strings, readable as numbers', () => {
    const details = envelopeSchema.parse(fixture('found-eligible')).eligibility_result?.data_dump?.data
      ?.copay_analysis?.copay_details;
    const percentages = details?.map((d) => d.copay_percentage);
    expect(percentages).toContain('20%');
    expect(percentages).toContain('12.5');
    expect(parseLooseNumber('20%')).toBe(20);
    expect(parseLooseNumber('12.5')).toBe(12.5);
    expect(details?.some((d) => d.coverage_status === 'Not Covered')).toBe(true);
  });

  it('reads a comma only as a thousands separator; a percentage is never read out of an amount', () => {
    expect(parseLooseNumber('1,500')).toBe(1500);
    expect(parseLooseNumber('AED 1,500.50')).toBe(1500.5);
    expect(parseLooseNumber('50 AED')).toBe(50);
    expect(parseLooseNumber('12,5')).toBeNull();
    expect(parseLooseNumber('12,5%')).toBeNull();
    expect(parseLooseNumber('1,50')).toBeNull();
    expect(parsePercent('20%')).toBe(20);
    expect(parsePercent(' 12.5 % ')).toBe(12.5);
    expect(parsePercent(10)).toBe(10);
    expect(parsePercent('AED 50')).toBeNull();
    expect(parsePercent('12,5%')).toBeNull();
    expect(parsePercent('Nil')).toBeNull();
  });

  it('an odd type in a display field never costs the answer: what it said is kept as text', () => {
    const odd = edited(
      'found-eligible',
      [[...DATA, 'policy_network', 'sponsor_id'], 104233],
      [[...DATA, 'policy_network', 'is_gatekeeper'], true],
      [[...DATA, 'policy_network', 'policy_plan_name'], { text: 'Enhanced' }],
      [[...DATA, 'copay_details_to_fill', 0, 'values_to_fill', 'CONSULTATION', 'copay'], 20],
      [[...DATA, 'copay_analysis', 'copay_details', 0, 'copay_percentage'], ['20']],
    );
    const parsed = envelopeSchema.safeParse(odd);
    expect(parsed.success, JSON.stringify(parsed.error?.issues)).toBe(true);
    const data = parsed.data?.eligibility_result?.data_dump?.data;
    expect(data?.is_eligible).toBe(true);
    expect(data?.policy_network?.sponsor_id).toBe('104233');
    expect(data?.policy_network?.is_gatekeeper).toBe('true');
    expect(data?.policy_network?.policy_plan_name).toBe('{"text":"Enhanced"}');
    expect(data?.copay_details_to_fill?.[0]?.values_to_fill?.CONSULTATION?.copay).toBe('20');
    expect(data?.copay_analysis?.copay_details?.[0]?.copay_percentage).toBe('["20"]');
    // Where a wrong guess would mislead, the schema stays strict.
    expect(
      envelopeSchema.safeParse(edited('found-eligible', [[...DATA, 'is_eligible'], 'true'])).success,
    ).toBe(false);
  });

  it('stays strict where leniency would change the outcome: search_all_status, multi_card_total, card_index', () => {
    // Text made of another type would turn a single-payer answer into a search-all, or hide that
    // the member holds several cards (partial) behind a one-card answer (complete).
    for (const [path, value] of [
      [['search_all_status'], false],
      [[...DATA, 'multi_card_total'], [3]],
      [[...DATA, 'card_index'], true],
    ] as [Path, unknown][]) {
      expect(envelopeSchema.safeParse(edited('multi-card', [path, value])).success, path.join('.')).toBe(
        false,
      );
    }
  });

  it('accepts string numbers for card_index, multi_card_total and total_tpas_checked', () => {
    const card = edited('multi-card', [[...DATA, 'card_index'], '2'], [[...DATA, 'multi_card_total'], '3']);
    expect(envelopeSchema.safeParse(card).success).toBe(true);
    const search = edited('search-all-processing', [['total_tpas_checked'], '7']);
    expect(envelopeSchema.safeParse(search).success).toBe(true);
  });

  it('accepts a found result whose optional blocks are missing', () => {
    const optional = [
      'copay_analysis',
      'policy_network',
      'copay_details_to_fill',
      'warning_messages',
      'patient_info',
    ];
    const bare = edited(
      'found-eligible',
      ...optional.map((key): [Path, unknown] => [[...DATA, key], DELETE]),
      [['interim_results'], DELETE],
      [['request_dump'], DELETE],
    );
    expect(envelopeSchema.safeParse(bare).success).toBe(true);
  });

  it('accepts null blocks and null interim_results', () => {
    const nulls = edited(
      'found-eligible',
      [['interim_results'], null],
      [[...DATA, 'copay_analysis'], null],
      [[...DATA, 'policy_network', 'all_networks'], null],
    );
    expect(envelopeSchema.safeParse(nulls).success).toBe(true);
  });

  it('keeps unknown extra keys at every level', () => {
    const extra = edited(
      'found-eligible',
      [['brand_new_field'], { x: 1 }],
      [[...DATA, 'another_new_field'], 'y'],
    );
    const parsed = envelopeSchema.parse(extra);
    expect(parsed.brand_new_field).toEqual({ x: 1 });
    expect(parsed.eligibility_result?.data_dump?.data?.another_new_field).toBe('y');
  });

  it('accepts a warning entry without message_type', () => {
    const warnings = envelopeSchema.parse(fixture('found-eligible')).eligibility_result?.data_dump?.data
      ?.warning_messages;
    expect(warnings?.some((w) => w.message_type === undefined)).toBe(true);
    expect(warnings?.some((w) => w.message_type === 'information')).toBe(true);
  });

  it('accepts is_eligible null on tpa_not_configured', () => {
    const parsed = envelopeSchema.parse(fixture('tpa-not-configured'));
    expect(parsed.eligibility_result?.data_dump?.data?.is_eligible).toBeNull();
  });
});

describe('envelopeSchema, strict where a wrong guess would mislead', () => {
  it.each([
    ['"true"', 'true'],
    ['"false"', 'false'],
    ['1', 1],
  ])('rejects is_eligible given as %s', (_label, value) => {
    expect(
      envelopeSchema.safeParse(edited('found-eligible', [[...DATA, 'is_eligible'], value])).success,
    ).toBe(false);
  });

  it('never reads is_eligible "true" inside a search-all entry as eligible; that payer alone is undetermined', () => {
    const name = 'search-all-complete-two-eligible';
    const good = envelopeSchema.parse(fixture(name));
    const index = good.aggregated_results?.findIndex((r) => r.status === 'found') ?? -1;
    expect(index).toBeGreaterThanOrEqual(0);
    const bad = edited(name, [['aggregated_results', index, 'data', 'is_eligible'], 'true']);
    const parsed = envelopeSchema.safeParse(bad);
    expect(parsed.success).toBe(true);
    const entries = parsed.data?.aggregated_results ?? [];
    expect(entries[index]?.data?.is_eligible).toBeNull();
    // The other payers' answers are untouched.
    entries.forEach((entry, i) => {
      if (i !== index) expect(entry).toEqual(good.aggregated_results?.[i]);
    });
    // Data that breaks the schema elsewhere costs that payer's data only.
    const broken = edited(name, [['aggregated_results', index, 'data', 'copay_analysis'], 'Nil']);
    const brokenParsed = envelopeSchema.safeParse(broken);
    expect(brokenParsed.success).toBe(true);
    expect(brokenParsed.data?.aggregated_results?.[index]?.data).toBeNull();
    expect(brokenParsed.data?.aggregated_results?.[index]?.status).toBe('found');
  });

  it('rejects an envelope without task_id or status', () => {
    expect(envelopeSchema.safeParse(edited('found-eligible', [['task_id'], DELETE])).success).toBe(false);
    expect(envelopeSchema.safeParse(edited('found-eligible', [['status'], DELETE])).success).toBe(false);
    expect(envelopeSchema.safeParse(edited('found-eligible', [['status'], ''])).success).toBe(false);
  });

  it('rejects a create-task answer without task_id', () => {
    expect(createTaskAnswerSchema.safeParse({ task_id: 'abc' }).success).toBe(true);
    expect(createTaskAnswerSchema.safeParse({ id: 'abc' }).success).toBe(false);
  });
});
