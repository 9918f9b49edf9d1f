/**
 * Upstream envelope -> CoverageEligibilityResponse (src/mapping/response/), against the outcome
 * table (mappings/outcomes.json, docs/response-mapping.md) and the upstream's rules
 * (docs/upstream.md). Every CER and conformance resource goes through the real FHIR validator.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import fc from 'fast-check';
import type {
  CodeSystem,
  Coding,
  ConceptMap,
  DocumentReference,
  Coverage,
  CoverageEligibilityResponse,
  CoverageEligibilityResponseInsuranceItem,
  Extension,
  StructureDefinition,
} from 'fhir/r4.js';
import { describe, expect, it } from 'vitest';
import { anyEnvelope } from '../support/envelopes.js';
import { findAdapterError } from '../../src/mapping/response/adapter-errors.js';
import { decideAnswer, type CheckAnswer } from '../../src/mapping/response/answer.js';
import type { Check } from '../../src/checks/store/check-store.js';
import { answerForCheck } from '../../src/operations/check-answer.js';
import { CANONICAL_BASE } from '../../src/fhir/canonical.js';
import {
  OUTCOME_SYSTEM,
  adapterErrorCer,
  binaryId,
  conformanceResources,
  extensionUrl,
  mapEnvelope,
  outcomeRuleFor,
  parseBinaryId,
  queuedCer,
  resolveBinary,
  stillCheckingCer,
  submitOutcome,
} from '../../src/mapping/response/index.js';
import type { CopayDetail, Envelope, ResultData } from '../../src/upstream/contract.js';
import { envelopeSchema, parseLooseNumber } from '../../src/upstream/contract.js';
import { BASE_URL, CHECK_ID, cerContext } from '../support/cer-context.js';
import { expectValidFhir } from '../support/fhir.js';

const MAPPING_DIR = new URL('../fixtures/mapping/', import.meta.url);
const UPSTREAM_DIR = new URL('../fixtures/upstream/', import.meta.url);

const ctx = (isSearchAll = false) => cerContext(isSearchAll);

function readEnvelope(dir: URL, file: string): Envelope {
  return envelopeSchema.parse(JSON.parse(readFileSync(new URL(file, dir), 'utf8')));
}

const fixture = (name: string): Envelope => readEnvelope(MAPPING_DIR, `${name}.json`);

/** Every envelope fixture file: our hand-made ones and the sandbox's. */
function fixtureFiles(): { name: string; dir: URL; file: string }[] {
  return [MAPPING_DIR, UPSTREAM_DIR]
    .filter((dir) => existsSync(dir))
    .flatMap((dir) =>
      readdirSync(dir)
        .filter((f) => f.endsWith('.json'))
        .sort()
        .map((file) => ({ name: `${dir === MAPPING_DIR ? 'mapping' : 'upstream'}/${file}`, dir, file })),
    );
}

/** Every envelope fixture, parsed. */
function allFixtures(): { name: string; envelope: Envelope }[] {
  const fixtures = fixtureFiles().map(({ name, dir, file }) => ({ name, envelope: readEnvelope(dir, file) }));
  // The tests that loop over the fixtures assert nothing when there are none: both sets must be there.
  expect(new Set(fixtures.map(({ name }) => name.split('/')[0]))).toEqual(new Set(['mapping', 'upstream']));
  return fixtures;
}

/** A found, eligible answer whose only figures are these copay_details. */
function eligibleWithCopays(taskId: string, copayDetails: CopayDetail[]): Envelope {
  return {
    task_id: taskId,
    status: 'PROCESS_COMPLETE',
    eligibility_result: {
      status: 'found',
      tpa_name: 'DAMAN',
      data_dump: { data: { is_eligible: true, copay_analysis: { copay_details: copayDetails } } },
    },
  };
}

const isSearchAll = (e: Envelope) => e.is_search_all === true || Array.isArray(e.aggregated_results);
const cerOf = (e: Envelope) => mapEnvelope(e, ctx(isSearchAll(e)));

function ext(exts: Extension[] | undefined, id: Parameters<typeof extensionUrl>[0]): Extension[] {
  return (exts ?? []).filter((e) => e.url === extensionUrl(id));
}
function part(e: Extension | undefined, name: string): Extension | undefined {
  return e?.extension?.find((p) => p.url === name);
}
function sourceOf(item: CoverageEligibilityResponseInsuranceItem): string | undefined {
  return ext(item.extension, 'benefit-source')[0]?.valueString;
}

describe('outcome table: envelope -> CER outcome, $submit status, retry', () => {
  const rows: {
    file: string;
    upstream: string;
    cerOutcome: CoverageEligibilityResponse['outcome'];
    httpStatus: number;
    retry: string;
    guard?: string;
    inforce?: boolean | 'absent';
    errorCode?: string;
    /** The upstream's error_type and message, as the fixture gives them. */
    upstreamErrorType?: string;
    upstreamMessage?: string;
    disposition: string[];
  }[] = [
    {
      file: 'found-eligible-rich',
      upstream: 'found_eligible',
      cerOutcome: 'complete',
      httpStatus: 200,
      retry: 'none',
      inforce: true,
      disposition: ['eligible'],
    },
    {
      file: 'found-not-eligible',
      upstream: 'found_not_eligible',
      cerOutcome: 'complete',
      httpStatus: 200,
      retry: 'never',
      inforce: false,
      disposition: ['Policy lapsed on 2026-10-31; renewal not received'],
    },
    {
      file: 'multi-card',
      upstream: 'found_eligible_multi_card',
      cerOutcome: 'partial',
      httpStatus: 200,
      retry: 'none',
      inforce: true,
      disposition: ['The member holds 3 cards'],
    },
    {
      file: 'found-no-determination',
      upstream: 'found_no_determination',
      cerOutcome: 'error',
      httpStatus: 502,
      retry: 'never',
      errorCode: 'no-determination',
      disposition: ['no eligibility determination'],
    },
    {
      file: 'member-not-found',
      upstream: 'member_not_found',
      cerOutcome: 'error',
      httpStatus: 200,
      retry: 'none',
      errorCode: 'member-not-found',
      disposition: ['different payer', 'card number', 'typo'],
    },
    {
      file: 'invalid-credentials',
      upstreamErrorType: 'LOGIN_FAILED',
      upstreamMessage: 'Invalid username or password for the AXA portal',
      upstream: 'invalid_credentials',
      cerOutcome: 'error',
      httpStatus: 422,
      retry: 'never',
      guard: 'credentials',
      errorCode: 'invalid-credentials',
      disposition: ['LOGIN_FAILED: Invalid username or password for the AXA portal'],
    },
    {
      file: 'tpa-not-configured',
      upstream: 'tpa_not_configured',
      cerOutcome: 'error',
      httpStatus: 422,
      retry: 'never',
      errorCode: 'payer-not-configured',
      disposition: ['no login configured'],
    },
    {
      file: 'backoff',
      upstreamErrorType: 'BACKOFF',
      upstreamMessage: 'Too many failed logins; retry after 15 minutes',
      upstream: 'backoff',
      cerOutcome: 'error',
      httpStatus: 503,
      retry: 'later',
      guard: 'backoff',
      errorCode: 'payer-backoff',
      disposition: ['Too many failed logins; retry after 15 minutes'],
    },
    {
      file: 'failed',
      upstreamErrorType: 'PORTAL_TIMEOUT',
      upstreamMessage: 'The payer portal did not respond in time',
      upstream: 'failed',
      cerOutcome: 'error',
      httpStatus: 502,
      retry: 'once',
      errorCode: 'check-failed',
      disposition: ['PORTAL_TIMEOUT: The payer portal did not respond in time'],
    },
    {
      file: 'error',
      upstreamErrorType: 'UNEXPECTED',
      upstreamMessage: 'Unexpected page layout at step 3',
      upstream: 'error',
      cerOutcome: 'error',
      httpStatus: 502,
      retry: 'once',
      errorCode: 'check-error',
      disposition: ['UNEXPECTED: Unexpected page layout at step 3'],
    },
    {
      file: 'task-failed',
      upstream: 'task_failed',
      cerOutcome: 'error',
      httpStatus: 502,
      retry: 'never',
      errorCode: 'task-failed',
      disposition: ['failed'],
    },
    {
      file: 'task-failed-invalid-credentials',
      upstreamErrorType: 'LOGIN_FAILED',
      upstreamMessage: 'Account locked by payer',
      upstream: 'invalid_credentials',
      cerOutcome: 'error',
      httpStatus: 422,
      retry: 'never',
      guard: 'credentials',
      errorCode: 'invalid-credentials',
      disposition: ['Account locked by payer'],
    },
    {
      file: 'task-cancelled',
      upstream: 'task_cancelled',
      cerOutcome: 'error',
      httpStatus: 409,
      retry: 'never',
      errorCode: 'task-cancelled',
      disposition: ['cancelled'],
    },
    {
      file: 'unknown-outcome',
      upstream: 'unknown_outcome',
      cerOutcome: 'error',
      httpStatus: 502,
      retry: 'never',
      errorCode: 'unknown-outcome',
      disposition: ['partially_verified', 'none is guessed'],
    },
    {
      file: 'in-flight',
      upstream: 'in_flight',
      cerOutcome: 'queued',
      httpStatus: 200,
      retry: 'none',
      disposition: ['in progress'],
    },
    {
      file: 'search-all-processing',
      upstream: 'search_all_processing',
      cerOutcome: 'queued',
      httpStatus: 200,
      retry: 'none',
      disposition: ['2 payers answered so far; 1 found the member'],
    },
    {
      file: 'search-all-complete',
      upstream: 'search_all_complete',
      cerOutcome: 'complete',
      httpStatus: 200,
      retry: 'none',
      disposition: [
        'eligible at DAMAN Insurance',
        'Found but not eligible at: AXA Insurance (Visit type not on the plan)',
      ],
    },
    {
      file: 'search-all-none-found',
      upstream: 'search_all_complete',
      cerOutcome: 'complete',
      httpStatus: 200,
      retry: 'none',
      disposition: ['No matching coverage found in the payers that responded (3 payers)'],
    },
    {
      file: 'search-all-two-eligible',
      upstream: 'search_all_complete',
      cerOutcome: 'complete',
      httpStatus: 200,
      retry: 'none',
      disposition: ['eligible at 2 payers'],
    },
    {
      file: 'search-all-failed',
      upstream: 'task_failed',
      cerOutcome: 'error',
      httpStatus: 502,
      retry: 'never',
      errorCode: 'task-failed',
      disposition: ['1 payer had answered'],
    },
  ];

  it.each(rows)('$file -> $upstream, outcome $cerOutcome, HTTP $httpStatus', (row) => {
    const envelope = fixture(row.file);
    const rule = outcomeRuleFor(envelope);
    expect(rule).toMatchObject({
      upstream: row.upstream,
      cerOutcome: row.cerOutcome,
      httpStatus: row.httpStatus,
      retry: row.retry,
    });
    expect(rule.guard).toBe(row.guard);
    const cer = cerOf(envelope);
    expectValidFhir(cer);
    expect(cer.outcome).toBe(row.cerOutcome);
    expect(cer.id).toBe(CHECK_ID);
    expect(cer.request.reference).toBe(`CoverageEligibilityRequest/${CHECK_ID}`);
    for (const text of row.disposition) expect(cer.disposition).toContain(text);
    if (row.errorCode) {
      expect(cer.error?.[0]?.code.coding?.[0]).toEqual({ system: OUTCOME_SYSTEM, code: row.errorCode });
    } else {
      expect(cer.error).toBeUndefined();
    }
    if (row.cerOutcome === 'error') {
      // No determination: never an insurance entry, never an inforce.
      expect(cer.insurance).toBeUndefined();
      expect(JSON.stringify(cer)).not.toContain('inforce');
    }
    if (row.inforce !== undefined) expect(cer.insurance?.[0]?.inforce).toBe(row.inforce);
    // The upstream's own message is the error text; error_type and message are kept for support.
    const outcomeExt = ext(cer.extension, 'upstream-outcome')[0];
    expect(part(outcomeExt, 'errorType')?.valueString).toBe(row.upstreamErrorType);
    expect(part(outcomeExt, 'message')?.valueString).toBe(row.upstreamMessage);
    if (row.upstreamMessage) {
      expect(cer.error?.[0]?.code.text).toBe(row.upstreamMessage);
      expect(cer.disposition).toContain(`${row.upstreamErrorType}: ${row.upstreamMessage}`);
    } else if (row.errorCode) {
      expect(cer.error?.[0]?.code.text).toBe(rule.text);
    }
  });

  it('the rows name every fixture that carries an upstream error_type or message', () => {
    const raw = (file: string) =>
      JSON.parse(readFileSync(new URL(`${file}.json`, MAPPING_DIR), 'utf8')) as {
        eligibility_result?: {
          error_type?: string | null;
          message?: string | null;
          data_dump?: { error_type?: string | null; message?: string | null } | null;
        } | null;
      };
    for (const row of rows) {
      const result = raw(row.file).eligibility_result;
      expect({
        file: row.file,
        errorType: result?.error_type ?? result?.data_dump?.error_type ?? undefined,
        message: result?.message ?? result?.data_dump?.message ?? undefined,
      }).toEqual({ file: row.file, errorType: row.upstreamErrorType, message: row.upstreamMessage });
    }
  });

  it('backoff asks the client to wait 900 seconds', () => {
    expect(outcomeRuleFor(fixture('backoff')).retryAfterSeconds).toBe(900);
  });

  it('tpa_not_configured (is_eligible null) never becomes inforce false', () => {
    const cer = cerOf(fixture('tpa-not-configured'));
    expect(cer.insurance).toBeUndefined();
  });

  it('a found result with is_eligible null is no determination, never "not eligible"', () => {
    const cer = cerOf(fixture('found-no-determination'));
    expect(cer.outcome).toBe('error');
    expect(cer.disposition).not.toMatch(/not eligible/i);
  });

  it('the disposition of a not-eligible result starts with failure_reason verbatim', () => {
    const cer = cerOf(fixture('found-not-eligible'));
    expect(cer.disposition?.startsWith('Policy lapsed on 2026-10-31; renewal not received')).toBe(true);
  });

  it('member_not_found lists the likely causes in order: other payer, ID not linked (card number), typo', () => {
    const text = cerOf(fixture('member-not-found')).disposition ?? '';
    const payer = text.indexOf('different payer');
    const card = text.indexOf('card number');
    const typo = text.indexOf('typo');
    expect(payer).toBeGreaterThan(-1);
    expect(card).toBeGreaterThan(payer);
    expect(typo).toBeGreaterThan(card);
  });

  it('every sandbox fixture maps to a valid CER whose outcome matches its rule', () => {
    for (const { name, envelope } of allFixtures()) {
      const cer = cerOf(envelope);
      expect({ name, errors: validate(cer) }).toEqual({ name, errors: [] });
      expect({ name, outcome: cer.outcome }).toEqual({ name, outcome: outcomeRuleFor(envelope).cerOutcome });
    }
  });
});

function validate(resource: unknown): string[] {
  try {
    expectValidFhir(resource);
    return [];
  } catch (err) {
    return [String(err)];
  }
}

describe('submitOutcome: the OperationOutcome for rows without a determination', () => {
  it.each([
    'invalid-credentials',
    'tpa-not-configured',
    'backoff',
    'failed',
    'error',
    'task-failed',
    'task-cancelled',
    'unknown-outcome',
  ])('%s -> error issue with the table issue code, the error code and the upstream message', (file) => {
    const envelope = fixture(file);
    const rule = outcomeRuleFor(envelope);
    const cer = cerOf(envelope);
    const outcome = submitOutcome(cer, rule);
    expectValidFhir(outcome);
    const [issue, info] = outcome.issue;
    // Outcomes about the clinic's payer account also point at the request's insurer.
    const payerAccount = ['invalid_credentials', 'tpa_not_configured', 'backoff'].includes(rule.upstream);
    expect(issue).toMatchObject({
      severity: 'error',
      code: rule.issueCode,
      expression: payerAccount
        ? ['CoverageEligibilityResponse.error', 'CoverageEligibilityRequest.insurer']
        : ['CoverageEligibilityResponse.error'],
    });
    expect(issue?.details?.coding).toEqual([{ system: OUTCOME_SYSTEM, code: rule.errorCode }]);
    expect(issue?.details?.text).toBe(cer.disposition);
    const message = envelope.eligibility_result?.message ?? envelope.eligibility_result?.data_dump?.message;
    if (message) expect(info?.diagnostics).toContain(message);
    else expect(info).toBeUndefined();
  });
});

describe('copay completeness: every copay figure the portal gives reaches the CER', () => {
  type Figure = { source: string; value: string | number };
  const present = (v: unknown): v is string | number =>
    (typeof v === 'string' && v.trim() !== '') || typeof v === 'number';

  /** Every copay figure of a result, with the benefit-source it must appear under. */
  function figuresOf(data: ResultData): Figure[] {
    const out: Figure[] = [];
    const add = (source: string, values: unknown[]) => {
      for (const value of values) if (present(value)) out.push({ source, value });
    };
    (data.copay_analysis?.copay_details ?? []).forEach((d, i) => {
      const source = `copay_analysis.copay_details[${i}]`;
      add(source, [
        d.copay_percentage,
        d.copay_amount,
        d.copay_max_amount,
        d.coinsurance_percentage,
        d.copay_aggregate_cap,
      ]);
      const c = d.cost_sharing;
      if (c)
        add(`${source}.cost_sharing`, [
          c.copay_percentage,
          c.copay_amount,
          c.copay_maximum_amount,
          c.coinsurance_percentage,
        ]);
    });
    (data.copay_analysis?.new_version_of_copay_analysis?.benefits ?? []).forEach((b, i) =>
      (b.cost_sharing ?? []).forEach((c, j) =>
        add(`copay_analysis.new_version_of_copay_analysis.benefits[${i}].cost_sharing[${j}]`, [
          c.copay_percentage,
          c.copay_amount,
          c.copay_maximum_amount,
          c.coinsurance_percentage,
        ]),
      ),
    );
    (data.copay_details_to_fill ?? []).forEach((block, i) =>
      Object.entries(block.values_to_fill ?? {}).forEach(([key, v]) =>
        add(`copay_details_to_fill[${i}].values_to_fill.${key}`, [
          v.copay,
          v.deductible,
          v._copayAmount,
          v._copayMaxAmount,
          v._deductibleLegacy,
          v._maxDeductible,
        ]),
      ),
    );
    return out;
  }

  const normal = (v: unknown): string => {
    const n = parseLooseNumber(v);
    return n !== null ? String(n) : String(v).trim();
  };

  /** What the items with this source (or its parent, for a cost_sharing block it repeated) say. */
  function valuesAt(items: CoverageEligibilityResponseInsuranceItem[], source: string): Set<string> {
    const parent = source.replace(/\.cost_sharing$/, '');
    const values = new Set<string>();
    for (const item of items.filter((i) => sourceOf(i) === source || sourceOf(i) === parent)) {
      for (const b of item.benefit ?? []) {
        if (b.allowedUnsignedInt !== undefined) values.add(String(b.allowedUnsignedInt));
        if (b.allowedString !== undefined) values.add(normal(b.allowedString));
        if (b.allowedMoney?.value !== undefined) values.add(String(b.allowedMoney.value));
      }
      // A copay of "Not Covered" is carried as the item being excluded.
      if (item.excluded === true) values.add('not covered');
    }
    return values;
  }

  function resultsOf(
    envelope: Envelope,
    cer: CoverageEligibilityResponse,
  ): { data: ResultData; index: number }[] {
    if (isSearchAll(envelope)) {
      const found = (envelope.aggregated_results ?? []).filter(
        (e) => e.status === 'found' || e.status === 'member_found',
      );
      return cer.outcome === 'error' ? [] : found.map((e, index) => ({ data: e.data ?? {}, index }));
    }
    const data = envelope.eligibility_result?.data_dump?.data;
    return data && cer.insurance ? [{ data, index: 0 }] : [];
  }

  it('walks every fixture and finds each figure under its source item', () => {
    let checked = 0;
    for (const { name, envelope } of allFixtures()) {
      const cer = cerOf(envelope);
      for (const { data, index } of resultsOf(envelope, cer)) {
        const items = cer.insurance?.[index]?.item ?? [];
        for (const figure of figuresOf(data)) {
          const wanted = normal(figure.value).toLowerCase();
          const found = [...valuesAt(items, figure.source)].map((v) => v.toLowerCase());
          expect({ name, ...figure, found: found.includes(wanted) }).toEqual({
            name,
            ...figure,
            found: true,
          });
          checked++;
        }
      }
    }
    // The rich fixture alone has more than 60 figures: a walk that finds nothing is a broken test.
    expect(checked).toBeGreaterThan(60);
  });

  it('gives integer percentages as allowedUnsignedInt and decimals as "12.5%"', () => {
    const items = cerOf(fixture('found-eligible-rich')).insurance?.[0]?.item ?? [];
    const lab = items.find((i) => sourceOf(i) === 'copay_analysis.copay_details[1]');
    const consultation = items.find((i) => sourceOf(i) === 'copay_analysis.copay_details[0]');
    const percent = (i: typeof lab) => i?.benefit?.find((b) => b.type.coding?.[0]?.code === 'copay-percent');
    expect(percent(lab)?.allowedString).toBe('12.5%');
    expect(percent(consultation)?.allowedUnsignedInt).toBe(20);
    const copay = consultation?.benefit?.find((b) => b.type.coding?.[0]?.code === 'copay');
    expect(copay?.allowedMoney).toEqual({ value: 50, currency: 'AED' });
  });

  it('marks Not Covered items excluded and keeps ces-1 (category, never productOrService)', () => {
    const items = cerOf(fixture('found-eligible-rich')).insurance?.[0]?.item ?? [];
    const dental = items.find((i) => sourceOf(i) === 'copay_analysis.copay_details[2]');
    expect(dental?.excluded).toBe(true);
    expect(dental?.category?.coding?.[0]).toEqual({
      system: 'http://terminology.hl7.org/CodeSystem/ex-benefitcategory',
      code: '35',
    });
    for (const item of items) {
      expect(item.category).toBeDefined();
      expect(item.productOrService).toBeUndefined();
    }
  });

  it('maps all nine values_to_fill keys to their categories, in the Maternity block too', () => {
    const items = cerOf(fixture('found-eligible-rich')).insurance?.[0]?.item ?? [];
    const codeOf = (source: string) =>
      items
        .find((i) => sourceOf(i) === source)
        ?.category?.coding?.find((c) => c.system?.endsWith('/service-category'))?.code;
    const block = 'copay_details_to_fill[0].values_to_fill.';
    expect({
      CONSULTATION: codeOf(`${block}CONSULTATION`),
      LAB: codeOf(`${block}LAB`),
      RADIOLOGY: codeOf(`${block}RADIOLOGY`),
      PROCEDURE: codeOf(`${block}PROCEDURE`),
      DIAGNOSTICS: codeOf(`${block}DIAGNOSTICS`),
      DENTAL: codeOf(`${block}DENTAL CONSULTATION & PROCEDURE`),
      MEDICINES: codeOf(`${block}MEDICINES`),
      PHYSIOTHERAPY: codeOf(`${block}PHYSIOTHERAPY`),
      OPTICAL: codeOf(`${block}OPTICAL`),
      Maternity: codeOf('copay_details_to_fill[1].values_to_fill.CONSULTATION'),
    }).toEqual({
      CONSULTATION: 'consultation',
      LAB: 'lab',
      RADIOLOGY: 'radiology',
      PROCEDURE: 'procedure',
      DIAGNOSTICS: 'diagnostics',
      DENTAL: 'dental',
      MEDICINES: 'medicines',
      PHYSIOTHERAPY: 'physiotherapy',
      OPTICAL: 'optical',
      // A block names where a line sits, not what it covers (issue 35): the Maternity block's
      // CONSULTATION is a consultation line.
      Maternity: 'consultation',
    });
  });
});

describe('portal warnings, GP referral, multi-card', () => {
  it('carries every warning verbatim with its type (missing type = warning), in extensions and disposition', () => {
    const envelope = fixture('found-eligible-rich');
    const cer = cerOf(envelope);
    const warnings = envelope.eligibility_result?.data_dump?.data?.warning_messages ?? [];
    const messages = ext(cer.extension, 'portal-message');
    expect(messages.map((m) => [part(m, 'message')?.valueString, part(m, 'type')?.valueCode])).toEqual([
      [warnings[0]?.message, 'warning'],
      [warnings[1]?.message, 'warning'],
      [warnings[2]?.message, 'information'],
    ]);
    for (const w of warnings) expect(cer.disposition).toContain(`"${w.message}"`);
    expect(cer.disposition).toContain('Payer portal information: "Clinic rule: collect copay at reception"');
  });

  it('gives a warning screenshot a contained DocumentReference with a stable adapter link', () => {
    const envelope = fixture('found-eligible-rich');
    const cer = cerOf(envelope);
    const reference = part(ext(cer.extension, 'portal-message')[1], 'screenshot')?.valueReference?.reference;
    expect(reference).toBe('#warning-screenshot-1');
    const doc = cer.contained?.find((r) => `#${r.id ?? ''}` === reference) as DocumentReference | undefined;
    expect(doc).toMatchObject({ resourceType: 'DocumentReference', status: 'current' });
    expect(doc?.subject).toBeUndefined();
    const id = binaryId(CHECK_ID, 'screenshot', 1);
    expect(doc?.content[0]?.attachment.url).toBe(`${BASE_URL}/fhir/Binary/${id}`);
    expect(resolveBinary(envelope, parseBinaryId(id)!)?.url).toBe(
      envelope.eligibility_result?.data_dump?.data?.warning_messages?.[1]?.screenshot,
    );
    // A message without a screenshot has no screenshot part and no DocumentReference.
    expect(part(ext(cer.extension, 'portal-message')[0], 'screenshot')).toBeUndefined();
    expect(cer.contained?.some((r) => r.id === 'warning-screenshot-0')).toBe(false);
  });

  it('is_gatekeeper "Yes": the portal value, required = true, and authorizationRequired on consultation items', () => {
    const cer = cerOf(fixture('found-eligible-rich'));
    const insurance = cer.insurance?.[0];
    const gp = ext(insurance?.extension, 'gp-referral-required')[0];
    expect(part(gp, 'isGatekeeper')?.valueString).toBe('Yes');
    expect(part(gp, 'required')?.valueBoolean).toBe(true);
    const items = insurance?.item ?? [];
    const at = (source: string) => items.find((i) => sourceOf(i) === source);
    expect(at('copay_analysis.copay_details[0]')?.authorizationRequired).toBe(true);
    expect(at('copay_details_to_fill[2].values_to_fill.CONSULTATION')?.authorizationRequired).toBe(true);
    expect(at('copay_analysis.copay_details[1]')?.authorizationRequired).toBeUndefined();
    expect(cer.disposition).toContain(
      'A GP referral is required for specialist visits (payer portal: is_gatekeeper = "Yes")',
    );
  });

  it('is_gatekeeper "Not Mentioned": the value is kept, nothing is concluded', () => {
    const cer = cerOf(fixture('found-not-eligible'));
    const gp = ext(cer.insurance?.[0]?.extension, 'gp-referral-required')[0];
    expect(part(gp, 'isGatekeeper')?.valueString).toBe('Not Mentioned');
    expect(part(gp, 'required')).toBeUndefined();
    expect(JSON.stringify(cer)).not.toContain('authorizationRequired');
  });

  it('a GP consultation item is not gated even when a referral is required for specialists', () => {
    const cer = cerOf(fixture('search-all-complete'));
    const daman = cer.insurance?.[0];
    expect(part(ext(daman?.extension, 'gp-referral-required')[0], 'required')?.valueBoolean).toBe(true);
    expect(daman?.item?.[0]?.category?.coding?.[1]?.code).toBe('gp-consultation');
    expect(daman?.item?.[0]?.authorizationRequired).toBeUndefined();
  });

  it('multi-card: states plainly which card of how many, and that other cards are not shown', () => {
    const cer = cerOf(fixture('multi-card'));
    expect(cer.disposition).toContain(
      'The member holds 3 cards; this is card 2 (package Gold Plus, network Premier). Other cards are not shown.',
    );
    const card = ext(cer.insurance?.[0]?.extension, 'multi-card')[0];
    expect(card?.extension).toEqual([
      { url: 'cardIndex', valuePositiveInt: 2 },
      { url: 'cardTotal', valuePositiveInt: 3 },
      { url: 'cardNumber', valueString: 'NEU-CARD-0002' },
      { url: 'package', valueString: 'Gold Plus' },
      { url: 'network', valueString: 'Premier' },
    ]);
    const coverage = cer.contained?.[0] as { subscriberId?: string; network?: string };
    expect(coverage.subscriberId).toBe('NEU-CARD-0002');
    expect(coverage.network).toBe('Premier');
  });
});

describe('documents, signed links and patient data', () => {
  it('never hands out an upstream signed link: every fixture CER is free of them', () => {
    for (const { name, envelope } of allFixtures()) {
      const text = JSON.stringify(cerOf(envelope));
      expect({
        name,
        leaked: /s3\.amazonaws|X-Amz|sig=|expires=|sandbox-files|portal-docs/i.test(text),
      }).toEqual({ name, leaked: false });
    }
  });

  it('gives documents and the screenshot stable Binary URLs that resolve to the fresh upstream link', () => {
    const envelope = fixture('found-eligible-rich');
    const cer = cerOf(envelope);
    // Each is a contained DocumentReference, referenced from its extension (dom-3).
    const attachmentOfRef = (reference: string | undefined) => {
      const doc = cer.contained?.find((r) => `#${r.id ?? ''}` === reference) as DocumentReference | undefined;
      expect(doc?.resourceType).toBe('DocumentReference');
      expect(doc?.status).toBe('current');
      expect(doc?.type?.text).toBeTruthy();
      expect(doc?.description).toBeTruthy();
      // No patient data on the document, and only the adapter's link.
      expect(doc?.subject).toBeUndefined();
      expect(doc?.content).toHaveLength(1);
      expect(doc?.content[0]?.attachment.url?.startsWith(`${BASE_URL}/fhir/Binary/`)).toBe(true);
      return doc?.content[0]?.attachment;
    };
    const documents = ext(cer.extension, 'portal-document').map((e) =>
      attachmentOfRef(e.valueReference?.reference),
    );
    expect(documents).toEqual([
      {
        url: `${BASE_URL}/fhir/Binary/${CHECK_ID}.d0`,
        contentType: 'application/pdf',
        title: 'Eligibility form',
      },
      { url: `${BASE_URL}/fhir/Binary/${CHECK_ID}.d1`, title: 'Referral letter' },
    ]);
    const screenshot = attachmentOfRef(ext(cer.extension, 'portal-screenshot')[0]?.valueReference?.reference);
    expect(screenshot?.url).toBe(`${BASE_URL}/fhir/Binary/${CHECK_ID}.s`);
    const ref = parseBinaryId(`${CHECK_ID}.d1`);
    expect(ref).toEqual({ checkId: CHECK_ID, kind: 'document', index: 1 });
    expect(resolveBinary(envelope, ref!)?.url).toBe(
      envelope.eligibility_result?.data_dump?.data?.referral_documents?.[1]?.s3_url,
    );
    expect(resolveBinary(envelope, parseBinaryId(`${CHECK_ID}.s`)!)?.url).toBe(
      envelope.eligibility_result?.data_dump?.data?.screenshot_key,
    );
    expect(resolveBinary(envelope, { checkId: CHECK_ID, kind: 'document', index: 9 })).toBeNull();
  });

  it('shows interim documents while the check is in flight', () => {
    const cer = cerOf(fixture('in-flight'));
    expectValidFhir(cer);
    expect(ext(cer.extension, 'portal-document')).toHaveLength(1);
    const shot = ext(cer.extension, 'portal-screenshot')[0]?.valueReference?.reference;
    const doc = cer.contained?.find((r) => `#${r.id ?? ''}` === shot) as DocumentReference | undefined;
    expect(doc?.content[0]?.attachment.contentType).toBe('image/jpeg');
  });

  it('does not echo the policy holder name, Emirates ID, date of birth or phone', () => {
    let checked = 0;
    for (const { name, envelope } of allFixtures()) {
      const text = JSON.stringify(cerOf(envelope));
      const datas = [
        envelope.eligibility_result?.data_dump?.data,
        ...(envelope.aggregated_results ?? []).map((e) => e.data),
      ];
      const personal = [
        envelope.request_dump?.name,
        envelope.request_dump?.emirates_id,
        envelope.request_dump?.dob,
        envelope.request_dump?.phone,
        ...datas.flatMap((d) => [
          d?.policy_holder_name,
          d?.policy_holder_emirates_id,
          d?.policy_holder_dob,
          d?.patient_info?.policy_holder_name,
          d?.patient_info?.patient_emirates_id,
          d?.patient_info?.policy_holder_dob,
          d?.policy_network?.policy_holder_name,
        ]),
      ].filter((v): v is string => typeof v === 'string' && v.length > 3);
      // A card number searched by is the member's card number, which the Coverage needs.
      const cardSearch =
        envelope.request_dump?.id_type === 'CARDNUMBER' ? envelope.request_dump.emirates_id : undefined;
      for (const value of personal.filter((v) => v !== cardSearch)) {
        expect({ name, value, echoed: text.includes(value) }).toEqual({ name, value, echoed: false });
        checked += 1;
      }
    }
    // Every sandbox fixture carries its request_dump (name, Emirates ID, dob, phone): 305 values today.
    expect(checked).toBeGreaterThan(100);
  });
});

describe('search-all', () => {
  it('returns one insurance entry per payer that found the member, in the given order (created_at never ranks)', () => {
    const cer = cerOf(fixture('search-all-two-eligible'));
    expect(cer.insurance?.map((i) => i.inforce)).toEqual([true, true]);
    const payors = (cer.contained ?? []).map((c) => (c as Coverage).payor[0]?.identifier?.value);
    expect(payors).toEqual(['THIQA', 'DAMAN']);
    expect(cer.insurance?.map((i) => i.coverage.reference)).toEqual(['#coverage-1', '#coverage-2']);
    const warning = ext(cer.insurance?.[1]?.extension, 'portal-message')[0];
    expect(part(warning, 'message')?.valueString).toBe('Co-payment waived for this visit type');
  });

  it('records every payer that responded, with its status', () => {
    const cer = cerOf(fixture('search-all-complete'));
    const responses = ext(cer.extension, 'search-all-response').map((e) => [
      part(e, 'payer')?.valueString,
      part(e, 'status')?.valueString,
      part(e, 'eligible')?.valueBoolean,
    ]);
    expect(responses).toEqual([
      ['NAS', 'member_not_found', false],
      ['DAMAN', 'found', true],
      ['AXA', 'member_found', false],
      ['MEDNET', 'tpa_not_configured', undefined],
    ]);
    expect(cer.insurance?.map((i) => i.inforce)).toEqual([true, false]);
    const outcome = ext(cer.extension, 'upstream-outcome')[0];
    expect(part(outcome, 'payersResponded')?.valueUnsignedInt).toBe(4);
  });

  it('a payer that found the member without a determination is named, never counted as no coverage', () => {
    const base = fixture('search-all-complete');
    const envelope: Envelope = {
      ...base,
      aggregated_results: [
        { status: 'member_not_found', tpa_name: 'NAS', data: { is_eligible: false } },
        {
          status: 'found',
          tpa_name: 'DAMAN',
          data: { is_eligible: null, policy_network: { payer_name: 'Daman' } },
        },
      ],
    };
    const cer = cerOf(envelope);
    expectValidFhir(cer);
    expect(cer.outcome).toBe('complete');
    expect(cer.insurance).toHaveLength(1);
    expect(cer.insurance?.[0]?.inforce).toBeUndefined();
    expect(cer.disposition).toContain('Found, but no eligibility determination, at: Daman.');
    expect(cer.disposition).not.toContain('No matching coverage found');
  });

  it('stays queued while SEARCH_ALL_PROCESSING, listing the payers that already found the member', () => {
    const cer = cerOf(fixture('search-all-processing'));
    expect(cer.outcome).toBe('queued');
    expect(cer.insurance).toHaveLength(1);
  });

  it('still checking after the timeout: queued, says so, keeps the payers that answered', () => {
    const cer = stillCheckingCer(ctx(true), fixture('search-all-processing'));
    expectValidFhir(cer);
    expect(cer.outcome).toBe('queued');
    expect(cer.disposition).toMatch(/^Still checking/);
    expect(cer.insurance).toHaveLength(1);
  });

  it('treats an envelope as a search-all when only the check says so', () => {
    const envelope = { ...fixture('search-all-none-found'), is_search_all: null };
    const cer = mapEnvelope(envelope, ctx(true));
    expect(cer.disposition).toContain('No matching coverage found');
  });
});

describe('queued, still checking and adapter errors', () => {
  it('queuedCer: outcome queued with a plain-text disposition', () => {
    const cer = queuedCer(ctx());
    expectValidFhir(cer);
    expect(cer).toMatchObject({
      outcome: 'queued',
      disposition: 'Eligibility check in progress at the payer portal.',
    });
    expect(queuedCer(ctx(), 'Waiting for a free slot').disposition).toBe('Waiting for a free slot');
  });

  it('stillCheckingCer without an envelope: queued, still checking', () => {
    const cer = stillCheckingCer(ctx(), null);
    expectValidFhir(cer);
    expect(cer.outcome).toBe('queued');
    expect(cer.disposition).toMatch(/^Still checking/);
  });

  it('adapterErrorCer: outcome error with the code in the service outcome CodeSystem, found again by answers.ts', () => {
    const row = findAdapterError('ambiguous-create')!;
    const cer = adapterErrorCer(ctx(), { code: 'ambiguous-create', text: row.text });
    expectValidFhir(cer);
    const coding = cer.error?.[0]?.code.coding?.[0];
    expect(coding).toEqual({ system: OUTCOME_SYSTEM, code: 'ambiguous-create' });
    expect(findAdapterError(coding?.code)).toBe(row);
    expect(cer.disposition).toBe(row.text);
  });
});

describe('decideAnswer: what $submit answers, decided once per check', () => {
  it.each([
    ['invalid-credentials', 422, undefined, 'security'],
    ['backoff', 503, 900, 'throttled'],
    ['failed', 502, undefined, 'transient'],
    ['member-not-found', 200, undefined, undefined],
    ['found-eligible', 200, undefined, undefined],
  ])('a finished %s envelope: %i', (name, status, retryAfter, issueCode) => {
    const envelope = readEnvelope(UPSTREAM_DIR, `${name}.json`);
    const cer = mapEnvelope(envelope, ctx());
    const answer = decideAnswer(cer, envelope, false);
    expect(answer.status).toBe(status);
    expect(answer.retryAfterSeconds).toBe(retryAfter);
    expect(answer.outcome?.issue[0]?.code).toBe(issueCode);
    if (answer.outcome) {
      expectValidFhir(answer.outcome);
      expect(answer.outcome).toEqual(submitOutcome(cer, outcomeRuleFor(envelope)));
    }
  });

  it("an error the adapter decided: its row's status and an OperationOutcome naming its code", () => {
    const row = findAdapterError('ambiguous-create')!;
    const cer = adapterErrorCer(ctx(), { code: 'ambiguous-create', text: row.text });
    const answer = decideAnswer(cer, null, false);
    expect(answer.status).toBe(row.httpStatus);
    expectValidFhir(answer.outcome);
    expect(answer.outcome?.issue[0]?.details?.coding).toEqual([
      { system: OUTCOME_SYSTEM, code: 'ambiguous-create' },
    ]);
  });

  it('a CER still running or complete: 200 with the CER, no OperationOutcome', () => {
    expect(decideAnswer(queuedCer(ctx()), null, false)).toEqual({ status: 200 });
  });
});

describe('answerForCheck', () => {
  const base = 'https://adapter.example';
  const at = (cer: CoverageEligibilityResponse, answer: CheckAnswer | null, state: Check['state']) =>
    ({
      id: CHECK_ID,
      version: 2,
      cer,
      outcome: cer.outcome,
      state,
      answer,
      envelope: null,
      isSearchAll: false,
    }) as Check;

  it('answers with the stored answer', () => {
    const row = findAdapterError('task-lost')!;
    const cer = adapterErrorCer(ctx(), { code: 'task-lost', text: row.text });
    const stored = decideAnswer(cer, null, false);
    const answer = answerForCheck(at(cer, stored, 'done'), base);
    expect(answer.status).toBe(row.httpStatus);
    expect(answer.body).toEqual(stored.outcome);
    expect(answer.headers?.Location).toBe(`${base}/fhir/CoverageEligibilityResponse/${CHECK_ID}`);
  });

  it('a check a previous-release replica finished (no stored answer) gets the same answer', () => {
    const row = findAdapterError('task-lost')!;
    const cer = adapterErrorCer(ctx(), { code: 'task-lost', text: row.text });
    expect(answerForCheck(at(cer, null, 'done'), base)).toEqual(
      answerForCheck(at(cer, decideAnswer(cer, null, false), 'done'), base),
    );
    expect(row.httpStatus).toBeGreaterThanOrEqual(400);
  });

  it('a check still running: 200 with its queued CER', () => {
    const cer = queuedCer(ctx());
    const answer = answerForCheck(at(cer, null, 'polling'), base);
    expect(answer.status).toBe(200);
    expect(answer.body).toBe(cer);
  });
});

describe('binary ids', () => {
  it('round-trips any check id, kind and index, and every id is a FHIR id', () => {
    const checkId = fc.stringMatching(/^[A-Za-z0-9\-.]{1,50}$/);
    fc.assert(
      fc.property(checkId, fc.option(fc.nat(999_999), { nil: undefined }), (id, index) => {
        const shot = binaryId(id, 'screenshot', index);
        expect(shot).toMatch(/^[A-Za-z0-9\-.]{1,64}$/);
        expect(parseBinaryId(shot)).toEqual(
          index === undefined
            ? { checkId: id, kind: 'screenshot' }
            : { checkId: id, kind: 'screenshot', index },
        );
        const doc = binaryId(id, 'document', index ?? 0);
        expect(parseBinaryId(doc)).toEqual({ checkId: id, kind: 'document', index: index ?? 0 });
      }),
    );
  });

  it.each(['', 'abc', 'abc.x1', 'abc.d', 'abc.d01', '.s', 'a/b.s', `${'a'.repeat(64)}.s`])(
    'rejects %j',
    (id) => {
      expect(parseBinaryId(id)).toBeNull();
    },
  );

  it('refuses ids that would not be FHIR ids', () => {
    expect(() => binaryId('a'.repeat(63), 'screenshot')).toThrow(RangeError);
    expect(() => binaryId('bad/id', 'document', 0)).toThrow(RangeError);
  });
});

describe('conformance resources', () => {
  const resources = conformanceResources();

  it('publishes the code tables as ConceptMaps that say what the service does', () => {
    const maps = resources.filter((r): r is ConceptMap => r.resourceType === 'ConceptMap');
    expect(maps.map((m) => m.id).sort()).toEqual([
      'benefit-category-to-visit-type',
      'service-category-to-benefit-category',
    ]);
    for (const map of maps) {
      expect(map.url).toBe(`${CANONICAL_BASE}/ConceptMap/${map.id}`);
      expect(map.status).toBe('active');
    }
    const categories = maps.find((m) => m.id === 'service-category-to-benefit-category');
    const groupOf = (source: string, target: string) =>
      categories?.group?.find((g) => g.source === source && g.target === target);
    const serviceCategory = `${CANONICAL_BASE}/CodeSystem/service-category`;
    const benefitCategory = 'http://terminology.hl7.org/CodeSystem/ex-benefitcategory';
    const label = `${CANONICAL_BASE}/upstream/service_category_label`;
    const dental = groupOf(serviceCategory, benefitCategory)?.element?.find((e) => e.code === 'dental');
    expect(dental?.target?.[0]).toMatchObject({ code: '35', equivalence: 'equivalent' });
    // Portal label keywords: to our code (no keyword: other) and to ex-benefitcategory where one fits.
    const toOwn = groupOf(label, serviceCategory);
    expect(toOwn?.element?.find((e) => e.code === 'orthodontic')?.target?.[0]).toMatchObject({
      code: 'dental',
      equivalence: 'wider',
    });
    expect(toOwn?.unmapped).toMatchObject({ mode: 'fixed', code: 'other' });
    const toHl7 = groupOf(label, benefitCategory);
    expect(toHl7?.element?.find((e) => e.code === 'x ray')?.target?.[0]?.code).toBe('4');
    expect(toHl7?.element?.some((e) => e.code === 'physiotherapy')).toBe(false);
    // The map says what the mapper does: a label that is just a keyword gets that category.
    for (const element of toOwn?.element ?? []) {
      const cer = cerOf(eligibleWithCopays('t', [{ visit_type: element.code, copay_percentage: 10 }]));
      const codes = cer.insurance?.[0]?.item?.[0]?.category?.coding?.map((c) => c.code);
      expect({ label: element.code, codes }).toEqual({
        label: element.code,
        codes: [
          ...(toHl7?.element?.find((e) => e.code === element.code)?.target?.map((t) => t.code) ?? []),
          element.target?.[0]?.code,
        ],
      });
    }
    const visits = maps.find((m) => m.id === 'benefit-category-to-visit-type');
    const consultation = visits?.group
      ?.find((g) => g.source === 'http://terminology.hl7.org/CodeSystem/ex-benefitcategory')
      ?.element?.find((e) => e.code === '3');
    expect(consultation?.target?.[0]?.code).toBe('OUTPATIENT');
  });

  it.each(resources.map((r) => [`${r.resourceType}/${r.id}`, r] as const))(
    '%s is valid FHIR',
    (_name, resource) => {
      expectValidFhir(resource);
    },
  );

  /** Every extension URL and every coding of our own systems in a CER. */
  function ownTerms(value: unknown, found: { extensions: Set<string>; codings: Coding[] }): void {
    if (Array.isArray(value)) {
      for (const v of value) ownTerms(v, found);
      return;
    }
    if (typeof value !== 'object' || value === null) return;
    const record = value as Record<string, unknown>;
    if (typeof record.url === 'string' && record.url.startsWith(CANONICAL_BASE)) {
      const url = record.url;
      found.extensions.add(url);
      for (const sub of (record.extension as Extension[] | undefined) ?? [])
        found.extensions.add(`${url}#${sub.url}`);
    }
    if (typeof record.system === 'string' && record.system.startsWith(`${CANONICAL_BASE}/CodeSystem/`)) {
      found.codings.push(record);
    }
    for (const v of Object.values(record)) ownTerms(v, found);
  }

  it('defines every extension, sub-extension and code the CERs use', () => {
    const found = { extensions: new Set<string>(), codings: [] as Coding[] };
    for (const { envelope } of allFixtures()) ownTerms(cerOf(envelope), found);
    ownTerms(adapterErrorCer(ctx(), { code: 'task-lost', text: 'x' }), found);
    const defined = new Set<string>();
    for (const sd of resources.filter(
      (r): r is StructureDefinition => r.resourceType === 'StructureDefinition',
    )) {
      defined.add(sd.url);
      for (const el of sd.differential?.element ?? [])
        if (el.sliceName) defined.add(`${sd.url}#${el.sliceName}`);
    }
    const undefinedUrls = [...found.extensions].filter((u) => !defined.has(u));
    expect(undefinedUrls).toEqual([]);
    expect(found.extensions.size).toBeGreaterThan(30);
    const codes = new Map<string, Set<string>>();
    for (const cs of resources.filter((r): r is CodeSystem => r.resourceType === 'CodeSystem')) {
      codes.set(cs.url!, new Set((cs.concept ?? []).map((c) => c.code)));
    }
    const unknown = found.codings.filter((c) => !codes.get(c.system!)?.has(c.code!));
    expect(unknown).toEqual([]);
  });

  it('has one outcome CodeSystem with the upstream outcome codes and the adapter failure codes', () => {
    const cs = resources
      .filter((r): r is CodeSystem => r.resourceType === 'CodeSystem')
      .find((r) => r.url === OUTCOME_SYSTEM);
    const codes = (cs?.concept ?? []).map((c) => c.code);
    expect(codes).toEqual(
      expect.arrayContaining([
        'member-not-found',
        'unknown-outcome',
        'invalid-credentials',
        'ambiguous-create',
        'task-lost',
      ]),
    );
  });
});

describe('property: any schema-valid envelope maps to a valid CER', () => {
  it('never throws and always passes the validator (single payer and search-all)', () => {
    fc.assert(
      fc.property(anyEnvelope, (raw) => {
        const envelope = envelopeSchema.parse(raw);
        const cer = cerOf(envelope);
        expectValidFhir(cer);
        expect(cer.outcome).toBe(outcomeRuleFor(envelope).cerOutcome);
        expectValidFhir(stillCheckingCer(ctx(isSearchAll(envelope)), envelope));
      }),
      { numRuns: 200 },
    );
  });
});

describe('found-eligible-rich: Coverage, benefit period, items and policy details', () => {
  const typeCode = (b: { type: { coding?: Coding[] } }) => b.type.coding?.[0]?.code;
  const benefitOf = (item: CoverageEligibilityResponseInsuranceItem | undefined, code: string) =>
    item?.benefit?.find((b) => typeCode(b) === code);

  it('maps period, plan/package classes, network, benefit period, the Consultation item and policy details', () => {
    const cer = cerOf(fixture('found-eligible-rich'));
    expectValidFhir(cer);
    const insurance = cer.insurance?.[0];
    expect(insurance?.coverage.reference).toBe('#coverage');
    const coverage = cer.contained?.find((r) => r.id === 'coverage') as Coverage | undefined;
    expect(coverage?.resourceType).toBe('Coverage');
    expectValidFhir({ ...coverage, contained: undefined });

    // policy_network.start_date / valid_upto
    expect(coverage?.period).toEqual({ start: '2026-01-01', end: '2026-12-31' });
    expect(insurance?.benefitPeriod).toEqual({ start: '2026-01-01', end: '2026-12-31' });
    // policy_plan_name as plan, package_name as subplan
    expect(
      coverage?.class?.map((c) => [c.type.coding?.[0]?.system, c.type.coding?.[0]?.code, c.value, c.name]),
    ).toEqual([
      ['http://terminology.hl7.org/CodeSystem/coverage-class', 'plan', 'Enhanced Silver', 'Enhanced Silver'],
      ['http://terminology.hl7.org/CodeSystem/coverage-class', 'subplan', 'Silver Package', 'Silver Package'],
    ]);
    expect(coverage?.network).toBe('GN');
    expect(coverage?.subscriberId).toBe('DAM-0012345678');

    // The Consultation entry of copay_details: scope.network "In-Network", copay_max_scope "per claim".
    const consultation = insurance?.item?.find((i) => sourceOf(i) === 'copay_analysis.copay_details[0]');
    expect(consultation?.network?.coding?.[0]).toEqual({
      system: 'http://terminology.hl7.org/CodeSystem/benefit-network',
      code: 'in',
      display: 'In Network',
    });
    expect(consultation?.network?.text).toBe('In-Network');
    // "per claim" is no benefit-term code (annual, day, lifetime): kept as text, no coding guessed.
    expect(consultation?.term).toEqual({ text: 'per claim' });
    expect(consultation?.description).toContain('Specialist consultation requires GP referral');
    expect(consultation?.name).toBe('Consultation - Outpatient - UAE');
    expect(benefitOf(consultation, 'copay-maximum')?.allowedMoney).toEqual({ value: 100, currency: 'AED' });
    expect(benefitOf(consultation, 'copay-maximum')?.type.coding?.[0]?.system).toBe(
      'http://terminology.hl7.org/CodeSystem/benefit-type',
    );

    // values_to_fill.CONSULTATION: deductible "50", _copayMaxAmount "100" (no currency given: AED).
    const toFill = insurance?.item?.find(
      (i) => sourceOf(i) === 'copay_details_to_fill[0].values_to_fill.CONSULTATION',
    );
    expect(benefitOf(toFill, 'deductible')?.allowedMoney).toEqual({ value: 50, currency: 'AED' });
    expect(benefitOf(toFill, 'copay-maximum')?.allowedMoney).toEqual({ value: 100, currency: 'AED' });
    expect(benefitOf(toFill, 'copay')?.allowedMoney).toEqual({ value: 50, currency: 'AED' });
    // PROCEDURE deductible "AED 25" is read as 25 AED; PHYSIOTHERAPY "10%" is no amount, kept as text.
    const at = (key: string) =>
      insurance?.item?.find((i) => sourceOf(i) === `copay_details_to_fill[0].values_to_fill.${key}`);
    expect(benefitOf(at('PROCEDURE'), 'deductible')?.allowedMoney).toEqual({ value: 25, currency: 'AED' });
    expect(benefitOf(at('PHYSIOTHERAPY'), 'deductible')?.allowedString).toBe('10%');
    // The Laboratory entry has copay_max_amount 75.5.
    const lab = insurance?.item?.find((i) => sourceOf(i) === 'copay_analysis.copay_details[1]');
    expect(benefitOf(lab, 'copay-maximum')?.allowedMoney).toEqual({ value: 75.5, currency: 'AED' });

    // Policy facts without a core element: the policy-details extension on the Coverage.
    const details = ext(coverage?.extension, 'policy-details');
    expect(details).toHaveLength(1);
    expect(details[0]?.valueString).toBeUndefined();
    expect(part(details[0], 'isVip')?.valueString).toBe('No');
    expect(part(details[0], 'workSiteCovered')?.valueString).toBe('Could not determine');
    expect(part(details[0], 'policyAuthority')?.valueString).toBe('DHA');
    expect(part(details[0], 'policyJurisdiction')?.valueString).toBe('Dubai');
    expect(part(details[0], 'sponsorId')?.valueString).toBe('SPN-4410');
    expect(part(details[0], 'beneficiaryStartDate')?.valueDate).toBe('2024-03-15');
    // The dates were readable: no "as given" copy.
    expect(part(details[0], 'periodAsGiven')).toBeUndefined();
  });

  it('takes the period from policy_network start_date/valid_upto over policy_info, reading DD/MM/YYYY', () => {
    const envelope = structuredClone(fixture('found-eligible-rich'));
    const network = envelope.eligibility_result!.data_dump!.data!.policy_network!;
    network.start_date = '15/02/2026';
    network.valid_upto = '2027-02-14';
    const cer = cerOf(envelope);
    expectValidFhir(cer);
    const coverage = cer.contained?.find((r) => r.id === 'coverage') as Coverage | undefined;
    expect(coverage?.period).toEqual({ start: '2026-02-15', end: '2027-02-14' });
    expect(cer.insurance?.[0]?.benefitPeriod).toEqual({ start: '2026-02-15', end: '2027-02-14' });
  });

  it('gives a copay in another currency (copay_currency USD) as allowedMoney in that currency', () => {
    const envelope = eligibleWithCopays('task-usd', [
      {
        visit_type: 'Consultation',
        coverage_status: 'Covered',
        copay_amount: 40,
        copay_max_amount: '200',
        copay_currency: 'USD',
        copay_max_scope: 'annual',
      },
      // Lower case is still an ISO 4217 code; a currency word is no code and is not guessed.
      { visit_type: 'Laboratory', copay_amount: 15, copay_currency: 'eur' },
      { visit_type: 'Radiology', copay_amount: 30, copay_currency: 'Dirham' },
      // "Dhs" is how UAE portals write dirhams: AED. Three letters are not enough to be a code.
      { visit_type: 'Dental', copay_amount: 35, copay_currency: 'Dhs' },
      { visit_type: 'Optical', copay_amount: 45, copay_currency: 'Yes' },
      // A decimal comma and an amount where a percentage belongs: kept as text, not read as 125 % or 50 %.
      { visit_type: 'Physiotherapy', copay_percentage: '12,5%' },
      { visit_type: 'Procedure', copay_percentage: 'AED 50' },
    ]);
    const cer = cerOf(envelope);
    expectValidFhir(cer);
    const items = cer.insurance?.[0]?.item ?? [];
    const item = (i: number) => items.find((x) => sourceOf(x) === `copay_analysis.copay_details[${i}]`);
    expect(benefitOf(item(0), 'copay')?.allowedMoney).toEqual({ value: 40, currency: 'USD' });
    expect(benefitOf(item(0), 'copay-maximum')?.allowedMoney).toEqual({ value: 200, currency: 'USD' });
    expect(item(0)?.term?.coding?.[0]).toEqual({
      system: 'http://terminology.hl7.org/CodeSystem/benefit-term',
      code: 'annual',
    });
    expect(benefitOf(item(1), 'copay')?.allowedMoney).toEqual({ value: 15, currency: 'EUR' });
    expect(benefitOf(item(2), 'copay')?.allowedMoney).toEqual({ value: 30 });
    expect(item(2)?.description).toContain('Currency as given: Dirham');
    expect(benefitOf(item(3), 'copay')?.allowedMoney).toEqual({ value: 35, currency: 'AED' });
    expect(benefitOf(item(4), 'copay')?.allowedMoney).toEqual({ value: 45 });
    expect(item(4)?.description).toContain('Currency as given: Yes');
    expect(benefitOf(item(5), 'copay-percent')).toMatchObject({ allowedString: '12,5%' });
    expect(benefitOf(item(5), 'copay-percent')?.allowedUnsignedInt).toBeUndefined();
    expect(benefitOf(item(6), 'copay-percent')).toMatchObject({ allowedString: 'AED 50' });
    expect(benefitOf(item(6), 'copay-percent')?.allowedUnsignedInt).toBeUndefined();
  });
});

describe('property: mutated fixture envelopes map to a valid CER or fail the schema', () => {
  type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
  type Path = (string | number)[];

  const raws = fixtureFiles().map(({ name, dir, file }) => ({
    name,
    json: JSON.parse(readFileSync(new URL(file, dir), 'utf8')) as Json,
  }));

  /** Every path below the root (object keys and array indexes), depth first. */
  function pathsOf(value: Json, prefix: Path = []): Path[] {
    if (value === null || typeof value !== 'object') return [];
    const keys: (string | number)[] = Array.isArray(value) ? value.map((_, i) => i) : Object.keys(value);
    return keys.flatMap((k) => {
      const path = [...prefix, k];
      const child = (value as Record<string | number, Json>)[k] as Json;
      return [path, ...pathsOf(child, path)];
    });
  }

  /** Replaces (or, with `value` undefined, deletes) the value at `path`; no-op when an earlier edit removed it. */
  function edit(root: Json, path: Path, value: Json | undefined): void {
    let parent: Json = root;
    for (const key of path.slice(0, -1)) {
      if (parent === null || typeof parent !== 'object') return;
      parent = (parent as Record<string | number, Json>)[key] as Json;
    }
    if (parent === null || typeof parent !== 'object') return;
    const last = path.at(-1)!;
    if (Array.isArray(parent)) {
      if (typeof last !== 'number' || last >= parent.length) return;
      if (value === undefined) parent.splice(last, 1);
      else parent[last] = value;
    } else {
      if (!(String(last) in parent)) return;
      if (value === undefined) delete parent[String(last)];
      else parent[String(last)] = value;
    }
  }

  const randomValue: fc.Arbitrary<Json | undefined> = fc.oneof(
    { arbitrary: fc.constant(undefined), weight: 4 }, // delete
    { arbitrary: fc.constant(null), weight: 3 },
    fc.string(),
    fc.constantFrom('', ' ', 'Nil', '20%', 'AED 50', '31/12/2026', '2026-02-30', 'USD', 'Yes', '\u0007'),
    fc.integer({ min: -10, max: 3_000_000_000 }),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.boolean(),
    fc.jsonValue({ maxDepth: 2 }) as fc.Arbitrary<Json>,
    fc.array(fc.oneof(fc.string(), fc.integer(), fc.constant(null)), { maxLength: 3 }),
    fc.object({ maxDepth: 1 }) as fc.Arbitrary<Json>,
  );

  const mutation = fc.nat(raws.length - 1).chain((index) => {
    const paths = pathsOf(raws[index]!.json);
    return fc.record({
      index: fc.constant(index),
      edits: fc.array(fc.tuple(fc.constantFrom(...paths), randomValue), { minLength: 1, maxLength: 3 }),
    });
  });

  it('never throws, passes the validator and keeps the outcome of its rule (200 runs)', () => {
    expect(raws.length).toBeGreaterThanOrEqual(20);
    let parsed = 0;
    fc.assert(
      fc.property(mutation, ({ index, edits }) => {
        const json = structuredClone(raws[index]!.json);
        for (const [path, value] of edits) edit(json, path, value);
        const result = envelopeSchema.safeParse(json);
        if (!result.success) return;
        parsed += 1;
        const envelope = result.data;
        // Any exception (OperationOutcomeError included) fails: the mapper answers every schema-valid envelope.
        const cer = cerOf(envelope);
        expectValidFhir(cer);
        expect(cer.outcome).toBe(outcomeRuleFor(envelope).cerOutcome);
        expect(cer.id).toBe(CHECK_ID);
      }),
      { numRuns: 200 },
    );
    // Most mutations land deep in tolerant blocks: a run in which nothing parsed tests nothing.
    expect(parsed).toBeGreaterThan(40);
  });
});
