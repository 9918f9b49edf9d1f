/**
 * Zod schemas of the upstream task envelope (GET /eligibility-result/{task_id}).
 *
 * Source: docs/upstream.md, "What the adapter reads in the envelope".
 * Tolerant where the document says the upstream varies (unknown future in-flight statuses,
 * numbers given as strings, optional blocks, fields missing on some tasks, unknown extra keys);
 * strict where a wrong guess would mislead a clinician (is_eligible must be a boolean or null,
 * never a string we would have to interpret).
 */
import { z } from 'zod';

/** Terminal task statuses. Test membership in this set, never against in-flight values (Polling rules 1-2). */
export const TERMINAL_STATUSES = ['PROCESS_COMPLETE', 'CANCELLED', 'FAILED'] as const;
export type TerminalStatus = (typeof TERMINAL_STATUSES)[number];

/** True when the task status is terminal. Any other string (including ones never seen) means in flight. */
export function isTerminalStatus(status: string): status is TerminalStatus {
  return (TERMINAL_STATUSES as readonly string[]).includes(status);
}

/** Known eligibility_result.status values; anything else is kept as a string and mapped as unknown. */
export const KNOWN_OUTCOMES = [
  'found',
  'member_found',
  'member_not_found',
  'invalid_credentials',
  'failed',
  'error',
  'backoff',
  'tpa_not_configured',
] as const;
export type KnownOutcome = (typeof KNOWN_OUTCOMES)[number];

/**
 * What an odd value said, as text: a number or boolean as itself ("12345", "false"), an object or
 * a list as JSON; undefined when it says nothing.
 */
export function asText(value: unknown): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  try {
    return JSON.stringify(value);
  } catch {
    return undefined;
  }
}

/** A number the upstream may send as a string ("20", "20%", "12.5"). Unparseable strings stay strings. */
const looseNumber = z
  .transform((value: unknown): number | string | null | undefined =>
    // z.number() refuses a non-finite number (1e999 parses as Infinity): it becomes its text.
    (typeof value === 'number' && Number.isFinite(value)) || typeof value === 'string' || value === null
      ? value
      : asText(value),
  )
  .optional();
/** A number or a numeric string, strictly: a field that decides an outcome. */
const strictLooseNumber = z.union([z.number(), z.string()]).nullable().optional();

/**
 * A text field. Types beyond the document's shapes are "not shown" upstream: a number or a
 * boolean where text was expected is kept as its text (sponsor_id 12345, is_gatekeeper false),
 * anything else (an object, a list) as its JSON text, so one odd field never costs the whole
 * answer (its eligibility and copays) and nothing it said is dropped silently. Strict where a
 * wrong guess would mislead: is_eligible, the statuses, task_id.
 */
const str = z
  .transform((value: unknown): string | null | undefined =>
    typeof value === 'string' || value === null ? value : asText(value),
  )
  .optional();

export const documentEntrySchema = z.looseObject({
  s3_url: z.string(),
  tag: str,
  id: str,
  original_filename: str,
});
export type DocumentEntry = z.infer<typeof documentEntrySchema>;

export const warningEntrySchema = z.looseObject({
  message: z.string(),
  screenshot: str,
  warning: z.boolean().optional(),
  message_type: str,
});
export type WarningEntry = z.infer<typeof warningEntrySchema>;

export const networkEntrySchema = z.looseObject({
  network_name_as_in_text: str,
  network: str,
  network_value: str,
  visit_type: str,
  matched_plan_name: str,
  network_code: str,
  raw_plan_string: str,
  plan_code: str,
});
export type NetworkEntry = z.infer<typeof networkEntrySchema>;

export const costSharingSchema = z.looseObject({
  visit_type: str,
  visit_setting: str,
  copay_amount: looseNumber,
  copay_currency: str,
  copay_percentage: looseNumber,
  copay_maximum_scope: str,
  copay_maximum_amount: looseNumber,
  coinsurance_percentage: looseNumber,
});
export type CostSharing = z.infer<typeof costSharingSchema>;

export const copayDetailSchema = z.looseObject({
  visit_type: str,
  coverage_status: str,
  copay_percentage: looseNumber,
  copay_amount: looseNumber,
  copay_max_amount: looseNumber,
  copay_currency: str,
  copay_max_scope: str,
  coinsurance_percentage: looseNumber,
  visit_setting: str,
  remarks: str,
  copay_aggregate_cap: str,
  scope: z
    .looseObject({
      benefit: str,
      network: str,
      location: str,
      visit_setting: str,
      qualifiers: z.array(z.string()).nullable().optional(),
      is_default: z.boolean().nullable().optional(),
      label: str,
    })
    .nullable()
    .optional(),
  cost_sharing: costSharingSchema.nullable().optional(),
});
export type CopayDetail = z.infer<typeof copayDetailSchema>;

export const benefitEntrySchema = z.looseObject({
  service_category_standardized: str,
  service_category_original: str,
  coverage_status: str,
  cost_sharing: z.array(costSharingSchema).nullable().optional(),
  conditions: z.unknown().optional(),
  limits: z.unknown().optional(),
  remarks: str,
});
export type BenefitEntry = z.infer<typeof benefitEntrySchema>;

const dmyDateSchema = z.looseObject({ DD: looseNumber, MM: looseNumber, YYYY: looseNumber });

export const copayAnalysisSchema = z.looseObject({
  waiting_period: str,
  copay_details: z.array(copayDetailSchema).nullable().optional(),
  special_remarks: z.array(z.string()).nullable().optional(),
  new_version_of_copay_analysis: z
    .looseObject({
      benefits: z.array(benefitEntrySchema).nullable().optional(),
      policy_info: z
        .looseObject({
          waiting_period: str,
          policy_period_start: str,
          policy_period_end: str,
          policy_jurisdiction: str,
          beneficiary_start_date: dmyDateSchema.nullable().optional(),
        })
        .nullable()
        .optional(),
      general_remarks: z.array(z.string()).nullable().optional(),
      abbreviations_defined: z.array(z.unknown()).nullable().optional(),
    })
    .nullable()
    .optional(),
});
export type CopayAnalysis = z.infer<typeof copayAnalysisSchema>;

export const policyNetworkSchema = z.looseObject({
  policy_plan_name: str,
  package_name: str,
  package: str,
  card_network: str,
  network_billing_reference: str,
  payer_name: str,
  payer_name_as_in_text: str,
  sponsor_id: str,
  start_date: str,
  valid_upto: str,
  all_networks: z.array(networkEntrySchema).nullable().optional(),
  policy_authority: str,
  is_general_physician_referral_required_for_specialist_referral: z.boolean().nullable().optional(),
  is_gatekeeper: str,
  is_vip: str,
  waiting_period: str,
  policy_holder_name: str,
  work_site_covered: str,
});
export type PolicyNetwork = z.infer<typeof policyNetworkSchema>;

export const valueToFillSchema = z.looseObject({
  deductible: str,
  copay: str,
  should_set_copay: z.boolean().nullable().optional(),
  _copayAmount: str,
  _copayMaxAmount: str,
  _is_outpatient_fallback: z.boolean().nullable().optional(),
  _deductibleLegacy: str,
  _maxDeductible: str,
});
export type ValueToFill = z.infer<typeof valueToFillSchema>;

export const copayToFillSchema = z.looseObject({
  name: z.string(),
  values_to_fill: z.record(z.string(), valueToFillSchema).nullable().optional(),
  available_networks: z.array(networkEntrySchema).nullable().optional(),
  has_multiple_networks: z.boolean().nullable().optional(),
  primary_network: z
    .looseObject({ network: str, network_status: str, matched_plan_name: str })
    .nullable()
    .optional(),
});
export type CopayToFill = z.infer<typeof copayToFillSchema>;

export const patientInfoSchema = z.looseObject({
  policy_holder_name: str,
  patient_emirates_id: str,
  policy_primary_member_id: str,
  eligibility_id: str,
  policy_primary_dha_member_id: str,
  policy_holder_dob: str,
});

/** data_dump.data: the parsed result. Present on found and member_not_found. */
export const resultDataSchema = z.looseObject({
  payer_id: str,
  adjusted_tpa_name: str,
  // Strict on purpose: a string "true" must never become an eligible answer.
  is_eligible: z.boolean().nullable().optional(),
  failure_reason: str,
  show_data: z.boolean().nullable().optional(),
  was_identified_by_aggregator: z.boolean().nullable().optional(),
  patient_info: patientInfoSchema.nullable().optional(),
  policy_holder_name: str,
  policy_holder_emirates_id: str,
  policy_holder_dob: str,
  eligibility_id: str,
  copay_analysis: copayAnalysisSchema.nullable().optional(),
  policy_network: policyNetworkSchema.nullable().optional(),
  copay_details_to_fill: z.array(copayToFillSchema).nullable().optional(),
  screenshot_key: str,
  referral_documents: z.array(documentEntrySchema).nullable().optional(),
  warning_messages: z.array(warningEntrySchema).nullable().optional(),
  // Strict (no text fallback): a multi_card_total that cannot be read must not make a
  // several-card member look like a one-card answer (outcome complete instead of partial).
  card_index: strictLooseNumber,
  multi_card_total: strictLooseNumber,
  card_number: str,
  package_name: str,
  card_network: str,
  // error_type/message location is "not shown" upstream; tolerated here too.
  error_type: str,
  message: str,
});
export type ResultData = z.infer<typeof resultDataSchema>;

export const dataDumpSchema = z.looseObject({
  status: str,
  tpa: str,
  data: resultDataSchema.nullable().optional(),
  error_type: str,
  message: str,
});

export const eligibilityResultSchema = z.looseObject({
  id: str,
  tenant_id: str,
  clinic_id: str,
  created_at: str,
  updated_at: str,
  data_dump: dataDumpSchema.nullable().optional(),
  search_id: str,
  tpa_name: str,
  task_id: str,
  user_id: str,
  status: z.string(),
  error_type: str,
  message: str,
});
export type EligibilityResult = z.infer<typeof eligibilityResultSchema>;

/**
 * One payer's data in a search-all: as strict as a single payer's where it decides (is_eligible
 * "true" is never read as eligible), but an odd entry costs that payer only, not the whole
 * search: its is_eligible becomes null (no determination), and data that breaks the schema
 * elsewhere becomes null (the payer is still listed with its status).
 */
const searchAllDataSchema = resultDataSchema
  .extend({ is_eligible: z.boolean().nullable().optional().catch(null) })
  .nullable()
  .optional()
  .catch(null);

/** One payer's answer in a search-all task. Fields beyond status/data/created_at are "not shown". */
export const searchAllEntrySchema = z.looseObject({
  status: z.string(),
  data: searchAllDataSchema,
  created_at: str,
  tpa_name: str,
  tpa: str,
  error_type: str,
  message: str,
});
export type SearchAllEntry = z.infer<typeof searchAllEntrySchema>;

export const interimResultsSchema = z.looseObject({
  referral_documents: z.array(documentEntrySchema).nullable().optional(),
  screenshot_key: str,
  tpa_name: str,
});
export type InterimResults = z.infer<typeof interimResultsSchema>;

export const requestDumpSchema = z.looseObject({
  emirates_id: str,
  phone: str,
  practice_id: str,
  tpa_name: str,
  id_type: str,
  visit_type: str,
  name: str,
  doctorName: str,
  payerName: str,
  user_id: str,
  dob: str,
  mode: str,
  test_mode: z.boolean().nullable().optional(),
  extra_args: z.record(z.string(), z.unknown()).nullable().optional(),
});

/** The task envelope. */
export const envelopeSchema = z.looseObject({
  id: str,
  tenant_id: str,
  clinic_id: str,
  created_at: str,
  updated_at: str,
  task_id: z.string(),
  // Any string: the in-flight set may grow (Versioning). Terminal set checked by isTerminalStatus.
  status: z.string().min(1),
  request_dump: requestDumpSchema.nullable().optional(),
  interim_results: interimResultsSchema.nullable().optional(),
  is_search_all: z.boolean().nullable().optional(),
  // Decides whether this is a search-all: a string or nothing, never text made of another type.
  search_all_status: z.string().nullable().optional(),
  created_by_user_id: str,
  eligibility_result: eligibilityResultSchema.nullable().optional(),
  aggregated_results: z.array(searchAllEntrySchema).nullable().optional(),
  total_tpas_checked: looseNumber,
});
export type Envelope = z.infer<typeof envelopeSchema>;

/** Answer of POST /create-task. Only task_id is relied on (an assumption named in the README). */
export const createTaskAnswerSchema = z.looseObject({ task_id: z.string().min(1) });
export type CreateTaskAnswer = z.infer<typeof createTaskAnswerSchema>;

/** Body of POST /create-task: the request_dump fields plus doctorId (assumption, README). */
export interface UpstreamTaskRequest {
  emirates_id: string;
  id_type: string;
  phone: string;
  practice_id: string;
  tpa_name: string;
  payerName: string;
  visit_type: string;
  name: string;
  doctorName: string;
  doctorId?: string;
  user_id: string;
  dob?: string | null;
  is_search_all?: boolean;
  extra_args: {
    title: string;
    value: string;
    is_pod?: boolean;
    is_maternity?: boolean;
    not_related_to_chief_complaint?: boolean;
    free_followup_or_extended_followup?: boolean;
    request_start_time: number;
  };
}

/** A number with nothing around it: digits, optionally signed and with a decimal part. */
const PLAIN_NUMBER = /^-?\d+(\.\d+)?$/;
/** The same without a sign: a percentage is never negative. */
const PLAIN_PERCENT = /^\d+(\.\d+)?$/;

/**
 * Parse a number the upstream may send as a string ("20%", "12.5", "AED 1,500"); null when absent
 * or not plainly a number. A comma is read only as a thousands separator ("1,500"): "12,5" may be
 * a decimal comma, so it is no number here and the caller keeps the portal's text.
 */
export function parseLooseNumber(value: unknown): number | null {
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value !== 'string') return null;
  // Most figures are plain digits ("0", "50", "12.5"): read at once, without trimming and the
  // two replacements below (this runs for every figure of every item).
  if (PLAIN_NUMBER.test(value)) return Number(value);
  const cleaned = value
    .trim()
    .replace(/^AED\s*/i, '')
    .replace(/\s*(AED|%)$/i, '');
  if (PLAIN_NUMBER.test(cleaned)) return Number(cleaned);
  if (/^-?\d{1,3}(,\d{3})+(\.\d+)?$/.test(cleaned)) return Number(cleaned.replace(/,/g, ''));
  return null;
}

/**
 * A percentage: a number, or a string of digits with an optional "%" ("20%", "12.5"). Anything
 * else, an amount of money ("AED 50") or a decimal comma ("12,5%"), is no percentage: null, and
 * the caller keeps the portal's text rather than guess a copay.
 */
export function parsePercent(value: unknown): number | null {
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value !== 'string') return null;
  // Plain digits ("20", "12.5"), the usual copay, are read without a match and its capture.
  if (PLAIN_PERCENT.test(value)) return Number(value);
  const match = /^\s*(\d+(?:\.\d+)?)\s*%?\s*$/.exec(value);
  return match?.[1] === undefined ? null : Number(match[1]);
}

/** True when polling must stop: the terminal set, or a completed search-all (docs/upstream.md, Search-all). */
export function isFinished(envelope: Envelope, isSearchAll: boolean): boolean {
  if (envelope.status === 'CANCELLED' || envelope.status === 'FAILED') return true;
  if (isSearchAll) return envelope.search_all_status === 'SEARCH_ALL_COMPLETE';
  return isTerminalStatus(envelope.status);
}
