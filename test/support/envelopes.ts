/**
 * Upstream envelopes for property tests and the mapping's golden comparison (bench/mapping-golden.ts):
 * any value the envelope schema accepts (src/upstream/contract.ts), weighted towards found members
 * with a determination so that most cases reach the benefit mapping and the narrative.
 */
import fc from 'fast-check';
import { KNOWN_OUTCOMES } from '../../src/upstream/contract.js';

const loose = fc.oneof(
  fc.constant(null),
  fc.integer({ min: -5, max: 3_000_000_000 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom('20%', '12.5', 'AED 50', 'Nil', '', '  ', '0', '1,000', '50 AED', 'Not Covered', '\u0007x'),
  fc.string(),
);
const text = fc.option(
  fc.oneof(fc.string(), fc.constantFrom('Yes', 'No', 'Not Mentioned', 'In-Network', 'out', 'annual')),
  { nil: null },
);
const costSharing = fc.record(
  {
    visit_type: text,
    visit_setting: text,
    copay_amount: loose,
    copay_currency: fc.option(fc.oneof(fc.constantFrom('AED', 'usd', 'Dhs', ''), fc.string()), {
      nil: null,
    }),
    copay_percentage: loose,
    copay_maximum_scope: text,
    copay_maximum_amount: loose,
    coinsurance_percentage: loose,
  },
  { requiredKeys: [] },
);
const copayDetail = fc.record(
  {
    visit_type: text,
    coverage_status: fc.option(fc.constantFrom('Covered', 'Not Covered', 'Partially'), { nil: null }),
    copay_percentage: loose,
    copay_amount: loose,
    copay_max_amount: loose,
    copay_currency: text,
    copay_max_scope: text,
    coinsurance_percentage: loose,
    remarks: text,
    copay_aggregate_cap: text,
    cost_sharing: fc.option(costSharing, { nil: null }),
  },
  { requiredKeys: [] },
);
const valueToFill = fc.record(
  {
    deductible: fc.option(fc.oneof(fc.string(), fc.constantFrom('50', '10%', 'AED 25')), { nil: null }),
    copay: fc.option(fc.oneof(fc.string(), fc.constantFrom('20', '12.5%', 'Not Covered')), { nil: null }),
    _copayAmount: text,
    _copayMaxAmount: text,
    _deductibleLegacy: text,
    _maxDeductible: text,
    _is_outpatient_fallback: fc.option(fc.boolean(), { nil: null }),
  },
  { requiredKeys: [] },
);
const data = fc.record(
  {
    is_eligible: fc.option(fc.boolean(), { nil: null }),
    failure_reason: text,
    card_index: loose,
    multi_card_total: loose,
    card_number: text,
    package_name: text,
    card_network: text,
    patient_info: fc.record({ policy_primary_member_id: text }, { requiredKeys: [] }),
    copay_analysis: fc.record(
      {
        waiting_period: text,
        copay_details: fc.array(copayDetail, { maxLength: 3 }),
        special_remarks: fc.array(fc.string(), { maxLength: 2 }),
        new_version_of_copay_analysis: fc.record(
          {
            benefits: fc.array(
              fc.record(
                {
                  service_category_standardized: text,
                  service_category_original: text,
                  coverage_status: text,
                  cost_sharing: fc.array(costSharing, { maxLength: 2 }),
                  conditions: fc.oneof(fc.constant(null), fc.string(), fc.object({ maxDepth: 1 })),
                  limits: fc.oneof(fc.constant(null), fc.string()),
                  remarks: text,
                },
                { requiredKeys: [] },
              ),
              { maxLength: 2 },
            ),
            policy_info: fc.record(
              {
                policy_period_start: fc.option(
                  fc.constantFrom('2026-01-01', '31/12/2026', '2026-02-30', 'soon'),
                  { nil: null },
                ),
                policy_period_end: fc.option(fc.constantFrom('2025-12-31', '2026-12-31', 'later'), {
                  nil: null,
                }),
                beneficiary_start_date: fc.record({ DD: loose, MM: loose, YYYY: loose }),
              },
              { requiredKeys: [] },
            ),
          },
          { requiredKeys: [] },
        ),
      },
      { requiredKeys: [] },
    ),
    policy_network: fc.record(
      {
        is_gatekeeper: text,
        is_vip: text,
        start_date: text,
        valid_upto: text,
        policy_plan_name: text,
        payer_name: text,
      },
      { requiredKeys: [] },
    ),
    copay_details_to_fill: fc.array(
      fc.record({
        name: fc.constantFrom('Outpatient', 'Maternity', 'Specialization', 'Inpatient', ''),
        values_to_fill: fc.dictionary(
          fc.constantFrom('CONSULTATION', 'LAB', 'OPTICAL', 'MEDICINES', 'X'),
          valueToFill,
          { maxKeys: 3 },
        ),
      }),
      { maxLength: 2 },
    ),
    warning_messages: fc.array(
      fc.record({
        message: fc.string(),
        message_type: fc.option(fc.constantFrom('warning', 'information', 'error'), { nil: undefined }),
        screenshot: text,
      }),
      { maxLength: 3 },
    ),
    referral_documents: fc.array(fc.record({ s3_url: fc.webUrl(), tag: text, original_filename: text }), {
      maxLength: 2,
    }),
    screenshot_key: text,
  },
  { requiredKeys: [] },
);
/** Every outcome the upstream names, and one it does not. */
const resultStatus = fc.constantFrom<string>(...KNOWN_OUTCOMES, 'weird');
const single = fc.record({
  task_id: fc.constant('task-prop'),
  status: fc.constantFrom('PROCESS_COMPLETE', 'FAILED', 'CANCELLED', 'NAVIGATING_WEBSITE', 'SOMETHING_NEW'),
  eligibility_result: fc.option(
    fc.record({
      status: resultStatus,
      error_type: text,
      message: text,
      tpa_name: text,
      data_dump: fc.record({ data: fc.option(data, { nil: null }) }),
    }),
    { nil: null },
  ),
});
const searchAll = fc.record({
  task_id: fc.constant('task-prop-all'),
  status: fc.constantFrom('PROCESS_COMPLETE', 'NAVIGATING_WEBSITE', 'FAILED'),
  is_search_all: fc.constant(true),
  search_all_status: fc.constantFrom('SEARCH_ALL_PROCESSING', 'SEARCH_ALL_COMPLETE'),
  aggregated_results: fc.array(
    fc.record({ status: resultStatus, tpa_name: text, data: fc.option(data, { nil: null }) }),
    { maxLength: 3 },
  ),
});

// Most runs should reach the benefit mapping: a found result with a determination.
const decided = fc.tuple(data, fc.boolean()).map(([d, eligible]) => ({ ...d, is_eligible: eligible }));
const found = fc.record({
  task_id: fc.constant('task-prop-found'),
  status: fc.constant('PROCESS_COMPLETE'),
  eligibility_result: fc.record({
    status: fc.constantFrom('found', 'member_found'),
    data_dump: fc.record({ data: decided }),
  }),
});
const searchAllFound = fc.record({
  task_id: fc.constant('task-prop-all-found'),
  status: fc.constant('PROCESS_COMPLETE'),
  is_search_all: fc.constant(true),
  search_all_status: fc.constant('SEARCH_ALL_COMPLETE'),
  aggregated_results: fc.array(fc.record({ status: fc.constant('found'), tpa_name: text, data: decided }), {
    minLength: 1,
    maxLength: 3,
  }),
});
export const anyEnvelope = fc.oneof(
  { arbitrary: found, weight: 4 },
  { arbitrary: searchAllFound, weight: 2 },
  { arbitrary: single, weight: 2 },
  { arbitrary: searchAll, weight: 1 },
);
