/**
 * data_dump.data payloads of the sandbox, in the shapes the upstream sends (docs/upstream.md,
 * "What the adapter reads in the envelope": copay_analysis, policy_network, copay_details_to_fill,
 * warnings). Pure: everything
 * comes from the context, so fixtures built from these functions are stable.
 */
import type { Signer } from './links.js';
import { PAYERS } from './scenarios.js';

/** What a payload is built from. */
export interface PayloadContext {
  taskId: string;
  payer: string;
  /** The stored request (echoed patient fields). */
  request: { emirates_id: string; name: string; dob?: string | null | undefined };
  /** Year of the policy period (from the task's creation time). */
  year: number;
  sign: Signer;
}

export interface CardInfo {
  index: number;
  total: number;
  number: string;
  packageName: string;
  network: string;
}

function payerName(code: string): string {
  return PAYERS[code] ?? code;
}

/** The screenshot link of a task. */
export function screenshotKey(ctx: Pick<PayloadContext, 'taskId' | 'sign'>): string {
  return ctx.sign(`${ctx.taskId}_screenshot.png`);
}

/** The referral documents of a task, with fresh links. */
export function referralDocuments(ctx: Pick<PayloadContext, 'taskId' | 'sign'>): Record<string, unknown>[] {
  return [
    {
      s3_url: ctx.sign(`${ctx.taskId}_referral-form.pdf`),
      tag: 'Referral Form',
      id: 'referral_form',
      original_filename: 'referral_form.pdf',
    },
    {
      s3_url: ctx.sign(`${ctx.taskId}_eligibility-letter.pdf`),
      tag: 'Eligibility Letter',
      id: 'eligibility_letter',
    },
  ];
}

function network(name: string, code: string, visitType: string, plan: string): Record<string, unknown> {
  return {
    network_name_as_in_text: name,
    network: name.split(' ')[0] ?? name,
    network_value: code,
    visit_type: visitType,
    matched_plan_name: plan,
    network_code: code,
    raw_plan_string: `${plan} / ${name}`,
    plan_code: `${code}-${plan.replace(/\W/g, '').toUpperCase()}`,
  };
}

function allNetworks(plan: string): Record<string, unknown>[] {
  return [
    network('GN+ General Network Plus', 'GNP', 'Outpatient', plan),
    network('RN Restricted Network', 'RN', 'Inpatient', plan),
    network('Maternity Network', 'MAT', 'Maternity', plan),
  ];
}

type CopayRow = [
  visitType: string,
  status: string,
  percentage: number | string | null,
  amount: number | null,
  max: number | null,
];

// One percentage as "20%", one as the decimal string "12.5", one Not Covered (docs/upstream.md).
const COPAYS: CopayRow[] = [
  ['Consultation', 'Covered', '20%', null, 50],
  ['Pharmacy', 'Covered', '12.5', null, 100],
  ['Laboratory', 'Covered', 10, null, null],
  ['Radiology', 'Covered', 10, null, 200],
  ['Physiotherapy', 'Covered', null, 25, null],
  ['Dental', 'Not Covered', null, null, null],
];

function copayDetails(): Record<string, unknown>[] {
  return COPAYS.map(([visitType, status, percentage, amount, max], i) => ({
    visit_type: visitType,
    coverage_status: status,
    copay_percentage: percentage,
    copay_amount: amount,
    copay_max_amount: max,
    copay_currency: 'AED',
    copay_max_scope: max === null ? null : 'per claim',
    coinsurance_percentage: null,
    visit_setting: status === 'Covered' ? 'Outpatient' : null,
    remarks: status === 'Covered' ? `${visitType} covered on the GN+ network` : 'Not covered under this plan',
    ...(i === 0
      ? {
          copay_aggregate_cap: 'AED 500 per year',
          scope: {
            benefit: 'Consultation',
            network: 'GN+',
            location: 'UAE',
            visit_setting: 'Outpatient',
            qualifiers: ['general practitioner', 'specialist'],
            is_default: true,
            label: 'Consultation (GN+)',
          },
        }
      : {}),
    ...(status === 'Covered'
      ? {
          cost_sharing: {
            visit_type: visitType,
            copay_amount: amount,
            visit_setting: 'Outpatient',
            copay_currency: 'AED',
            copay_percentage: percentage,
            copay_maximum_scope: max === null ? null : 'per_claim',
            copay_maximum_amount: max,
            coinsurance_percentage: null,
          },
        }
      : {}),
  }));
}

function benefits(): Record<string, unknown>[] {
  const sharing = (visitType: string, pct: number | null, max: number | null, extra: boolean) => ({
    visit_type: visitType,
    visit_setting: 'Outpatient',
    copay_percentage: pct,
    copay_amount: null,
    copay_maximum_amount: max,
    ...(extra
      ? { copay_currency: 'AED', copay_maximum_scope: 'per_claim', coinsurance_percentage: null }
      : {}),
  });
  return [
    {
      service_category_standardized: 'CONSULTATION',
      service_category_original: 'Consultation (GP / Specialist)',
      coverage_status: 'Covered',
      cost_sharing: [sharing('Consultation', 20, 50, true)],
      conditions: null,
      limits: null,
      remarks: 'Specialist visits need a GP referral',
    },
    {
      service_category_standardized: 'MEDICINES',
      service_category_original: 'Pharmacy',
      coverage_status: 'Covered',
      cost_sharing: [sharing('Pharmacy', 12.5, 100, false)],
      conditions: null,
      limits: 'AED 5,000 per year',
      remarks: null,
    },
    {
      service_category_standardized: 'MATERNITY',
      service_category_original: 'Maternity (outpatient)',
      coverage_status: 'Covered',
      cost_sharing: [sharing('Maternity', 0, null, false)],
      conditions: 'Waiting period of 6 months',
      limits: { annual_limit: 'AED 15,000' },
      remarks: null,
    },
    {
      service_category_standardized: 'DENTAL CONSULTATION & PROCEDURE',
      service_category_original: 'Dental',
      coverage_status: 'Not Covered',
      cost_sharing: [],
      conditions: null,
      limits: null,
      remarks: 'Not covered under this plan',
    },
  ];
}

function copayAnalysis(year: number): Record<string, unknown> {
  return {
    waiting_period: 'Not Specified',
    copay_details: copayDetails(),
    special_remarks: ['Copay waived for follow-up within 7 days'],
    new_version_of_copay_analysis: {
      benefits: benefits(),
      policy_info: {
        waiting_period: 'Not Specified',
        policy_period_start: `${year}-01-01`,
        policy_period_end: `${year}-12-31`,
        policy_jurisdiction: 'Dubai',
        beneficiary_start_date: { DD: 1, MM: 1, YYYY: year },
      },
      general_remarks: ['Direct billing on the GN+ network'],
      abbreviations_defined: [{ abbreviation: 'GN+', meaning: 'General Network Plus' }],
    },
  };
}

/** The nine values_to_fill keys with [deductible, copay] per category. */
const VALUES_TO_FILL: [string, string, string][] = [
  ['CONSULTATION', '0', '20'],
  ['LAB', '0', '10'],
  ['RADIOLOGY', '0', '10'],
  ['PROCEDURE', '0', '10'],
  ['DIAGNOSTICS', '0', '10'],
  ['DENTAL CONSULTATION & PROCEDURE', '0', '0'],
  ['MEDICINES', '0', '12.5'],
  ['PHYSIOTHERAPY', '25', '0'],
  ['OPTICAL', '0', '0'],
];

function copaysToFill(plan: string): Record<string, unknown>[] {
  return ['Outpatient', 'Maternity'].map((name) => ({
    name,
    values_to_fill: Object.fromEntries(
      VALUES_TO_FILL.map(([key, deductible, copay], i) => [
        key,
        {
          deductible,
          copay,
          should_set_copay: copay !== '0',
          _copayAmount: deductible,
          _copayMaxAmount: key === 'CONSULTATION' ? '50' : '0',
          ...(name === 'Maternity' ? { _is_outpatient_fallback: true } : {}),
          ...(i === 0 ? { _deductibleLegacy: '0', _maxDeductible: '50' } : {}),
        },
      ]),
    ),
    available_networks: allNetworks(plan).slice(0, name === 'Outpatient' ? 2 : 1),
    has_multiple_networks: name === 'Outpatient',
    primary_network: { network: 'GN+', network_status: 'matched', matched_plan_name: plan },
  }));
}

function warnings(ctx: PayloadContext): Record<string, unknown>[] {
  return [
    {
      message: 'Prior approval request PA-2291 is pending for this member.',
      screenshot: null,
      warning: true,
      message_type: 'information',
    },
    // No message_type: a client must treat it as a warning.
    {
      message: 'The requesting doctor is not listed on the payer portal for this facility.',
      screenshot: null,
      warning: true,
    },
    {
      message: 'Claim form must be signed by the member.',
      screenshot: ctx.sign(`${ctx.taskId}_warning.png`),
      warning: true,
      message_type: 'warning',
    },
  ];
}

function patientInfo(ctx: PayloadContext): Record<string, unknown> {
  const memberId = `${ctx.payer}-${ctx.taskId.slice(0, 8).toUpperCase()}`;
  return {
    policy_holder_name: ctx.request.name,
    patient_emirates_id: ctx.request.emirates_id,
    policy_primary_member_id: memberId,
    eligibility_id: `ELG-${ctx.taskId.slice(0, 8).toUpperCase()}`,
    policy_primary_dha_member_id: `DHA-${memberId}`,
    policy_holder_dob: ctx.request.dob ?? '1990-01-01',
  };
}

/** The parsed result of a member found at the payer (eligible or not). */
export function foundData(
  ctx: PayloadContext,
  options: { eligible: boolean; failureReason?: string; card?: CardInfo },
): Record<string, unknown> {
  const info = patientInfo(ctx);
  const { card } = options;
  const plan = card?.packageName ?? 'Enhanced Plus';
  const year = options.eligible ? ctx.year : ctx.year - 1;
  return {
    payer_id: `PAYER-${ctx.payer}`,
    adjusted_tpa_name: ctx.payer,
    is_eligible: options.eligible,
    failure_reason: options.eligible ? null : (options.failureReason ?? 'Policy lapsed'),
    show_data: true,
    was_identified_by_aggregator: false,
    patient_info: info,
    policy_holder_name: info.policy_holder_name,
    policy_holder_emirates_id: info.patient_emirates_id,
    policy_holder_dob: info.policy_holder_dob,
    eligibility_id: info.eligibility_id,
    copay_analysis: copayAnalysis(year),
    policy_network: {
      policy_plan_name: plan,
      package_name: plan,
      package: plan,
      card_network: card?.network ?? 'GN+',
      network_billing_reference: null,
      payer_name: payerName(ctx.payer),
      payer_name_as_in_text: payerName(ctx.payer).toUpperCase(),
      sponsor_id: 'SP-104233',
      start_date: `${year}-01-01`,
      valid_upto: `${year}-12-31`,
      all_networks: allNetworks(plan),
      policy_authority: 'DHA',
      is_general_physician_referral_required_for_specialist_referral: true,
      is_gatekeeper: 'Yes',
      is_vip: 'No',
      waiting_period: null,
      policy_holder_name: info.policy_holder_name,
      work_site_covered: 'Could not determine',
    },
    copay_details_to_fill: copaysToFill(plan),
    screenshot_key: screenshotKey(ctx),
    referral_documents: referralDocuments(ctx),
    warning_messages: warnings(ctx),
    ...(card
      ? {
          card_index: card.index,
          multi_card_total: card.total,
          card_number: card.number,
          package_name: card.packageName,
          card_network: card.network,
        }
      : {}),
  };
}

/** member_not_found: show_data false, is_eligible false. */
export function memberNotFoundData(ctx: PayloadContext): Record<string, unknown> {
  return {
    payer_id: `PAYER-${ctx.payer}`,
    adjusted_tpa_name: ctx.payer,
    is_eligible: false,
    failure_reason: 'No member matches the identifier at this payer',
    show_data: false,
    was_identified_by_aggregator: false,
    screenshot_key: screenshotKey(ctx),
    referral_documents: [],
    warning_messages: [],
  };
}

/** tpa_not_configured: no determination, is_eligible null. */
export function notConfiguredData(ctx: Pick<PayloadContext, 'payer'>): Record<string, unknown> {
  return {
    payer_id: `PAYER-${ctx.payer}`,
    adjusted_tpa_name: ctx.payer,
    is_eligible: null,
    failure_reason: null,
    show_data: false,
    was_identified_by_aggregator: false,
  };
}

/** The card shown by the multi-card scenario. */
export const MULTI_CARD: CardInfo = {
  index: 2,
  total: 3,
  number: '4410-2222-0000009',
  packageName: 'Silver Network Package',
  network: 'SN',
};
