/**
 * A found result -> one CER insurance entry with its contained Coverage
 * (https://hl7.org/fhir/R4/coverage.html, https://hl7.org/fhir/R4/coverageeligibilityresponse.html).
 * Data minimisation: the Coverage carries the member/card number it needs and nothing else
 * about the person (no policy_holder_name, Emirates ID or date of birth).
 */
import type {
  Coverage,
  CoverageClass,
  CoverageEligibilityResponseInsurance as Insurance,
  Extension,
  Identifier,
  Reference,
} from 'fhir/r4.js';
import { PROFILES } from '../../fhir/canonical.js';
import type { ResultData } from '../../upstream/contract.js';
import { COVERAGE_CLASS_SYSTEM, V2_0203_SYSTEM, coding, concept, fhirText } from './codes.js';
import { costSharesOf } from './cost-shares.js';
import { periodOf } from './dates.js';
import { gpReferralExtension, multiCardExtension, policyDetailsExtension } from './extensions.js';
import { itemsOf } from './items.js';
import { gatekeeperRequired } from './vocabulary.js';

export interface InsuranceOptions {
  /** id of the contained Coverage ("coverage", or "coverage-{n}" in a search-all). */
  coverageId: string;
  patient: Reference;
  payor: Reference;
  /** Extensions for the insurance entry besides the policy ones (portal messages in a search-all). */
  extraExtensions?: Extension[];
}

function memberIdentifiers(values: string[]): Identifier[] {
  return values.map((value) => ({
    type: concept([coding(V2_0203_SYSTEM, 'MB', 'Member Number')]),
    value,
  }));
}

function classes(data: ResultData): CoverageClass[] {
  const network = data.policy_network;
  const plan = fhirText(network?.policy_plan_name);
  const pkg = fhirText(data.package_name ?? network?.package_name ?? network?.package);
  const out: CoverageClass[] = [];
  // https://hl7.org/fhir/R4/codesystem-coverage-class.html: plan, and subplan for the package.
  if (plan)
    out.push({ type: concept([coding(COVERAGE_CLASS_SYSTEM, 'plan', 'Plan')]), value: plan, name: plan });
  if (pkg)
    out.push({ type: concept([coding(COVERAGE_CLASS_SYSTEM, 'subplan', 'SubPlan')]), value: pkg, name: pkg });
  return out;
}

/** The contained Coverage of a found result. */
export function coverageOf(data: ResultData, options: InsuranceOptions): Coverage {
  const network = data.policy_network;
  const info = data.copay_analysis?.new_version_of_copay_analysis?.policy_info;
  const { period, asGiven } = periodOf(
    network?.start_date ?? info?.policy_period_start,
    network?.valid_upto ?? info?.policy_period_end,
  );
  const memberId = fhirText(data.patient_info?.policy_primary_member_id);
  const cardNumber = fhirText(data.card_number);
  const numbers = [memberId, cardNumber].filter(
    (v, i, all): v is string => v !== undefined && all.indexOf(v) === i,
  );
  const details = policyDetailsExtension(data, asGiven);
  const subscriberId = memberId ?? cardNumber;
  const cls = classes(data);
  const net = fhirText(data.card_network ?? network?.card_network);
  // Key order follows the R4 element order.
  const coverage: Coverage = {
    resourceType: 'Coverage',
    id: options.coverageId,
    // A contained resource may name its profile (dom-4 forbids only versionId and lastUpdated).
    meta: { profile: [PROFILES.portalCoverage] },
    ...(details ? { extension: [details] } : {}),
    ...(numbers.length > 0 ? { identifier: memberIdentifiers(numbers) } : {}),
    status: 'active',
    ...(subscriberId ? { subscriberId } : {}),
    beneficiary: options.patient,
    ...(period ? { period } : {}),
    payor: [options.payor],
    ...(cls.length > 0 ? { class: cls } : {}),
    ...(net ? { network: net } : {}),
  };
  return coverage;
}

/** The insurance entry of a found result and its Coverage (to be contained in the CER). */
export function insuranceOf(
  data: ResultData,
  options: InsuranceOptions,
): { insurance: Insurance; coverage: Coverage } {
  const coverage = coverageOf(data, options);
  const gpReferral = gatekeeperRequired(data.policy_network?.is_gatekeeper);
  const extensions = [
    gpReferralExtension(data.policy_network),
    multiCardExtension(data),
    ...(options.extraExtensions ?? []),
  ].filter((e): e is Extension => e !== undefined);
  const insurance: Insurance = { coverage: { reference: `#${options.coverageId}` } };
  if (extensions.length > 0) insurance.extension = extensions;
  // is_eligible null means no determination: inforce is left out, never set to false.
  if (typeof data.is_eligible === 'boolean') insurance.inforce = data.is_eligible;
  if (coverage.period) insurance.benefitPeriod = coverage.period;
  const items = itemsOf(costSharesOf(data), gpReferral);
  if (items.length > 0) insurance.item = items;
  return { insurance, coverage };
}
