/**
 * The profiles of what this service emits (https://hl7.org/fhir/R4/profiling.html): constraint
 * StructureDefinitions on CoverageEligibilityResponse, the stored CoverageEligibilityRequest, the
 * contained Coverage and the $estimate ClaimResponse. Each names the extensions it may carry as
 * slices of `extension`, discriminated by `url` (https://hl7.org/fhir/R4/profiling.html#slicing),
 * so a validator knows each one where it appears. Differentials only: the snapshots are generated
 * from R4 core by `npm run fhir-package` (scripts/fhir-package.ts) and read back by package.ts.
 */
import type { ElementDefinition, StructureDefinition } from 'fhir/r4.js';
import { PROFILES, canonical } from '../../fhir/canonical.js';
import type { ExtensionId } from '../response/codes.js';
import type { CommonFields } from './operations.js';

/** An extension a profile allows at one element: its id, and how many. */
interface Allowed {
  id: ExtensionId;
  max: '1' | '*';
}

interface ProfileSpec {
  id: string;
  url: string;
  type: 'CoverageEligibilityResponse' | 'CoverageEligibilityRequest' | 'Coverage' | 'ClaimResponse';
  name: string;
  title: string;
  description: string;
  /** Path below the resource ('' = the resource itself) -> the extensions allowed there. */
  extensions: Record<string, Allowed[]>;
  /**
   * Further constraints, as differential elements (ids and paths without the type), after the
   * extensions in the base's element order (no profile here has both).
   */
  rules?: ElementDefinition[];
}

const one = (id: ExtensionId): Allowed => ({ id, max: '1' });
const many = (id: ExtensionId): Allowed => ({ id, max: '*' });

/** The documents, the screenshot and the messages of the portal: on the CER and each insurance. */
const PORTAL = [many('portal-message'), many('portal-document'), one('portal-screenshot')];

const SPECS: ProfileSpec[] = [
  {
    id: 'eligibility-response',
    url: PROFILES.eligibilityResponse,
    type: 'CoverageEligibilityResponse',
    name: 'EligibilityResponse',
    title: 'Eligibility check answer',
    description:
      'The CoverageEligibilityResponse of one eligibility check at a UAE payer portal: queued while the check runs, then complete, partial or error. Its extensions carry what the portal said that R4 has no element for; the Coverage of each insurance is contained (profile portal-coverage).',
    extensions: {
      '': [one('upstream-outcome'), many('search-all-response'), ...PORTAL],
      insurance: [one('gp-referral-required'), one('multi-card'), ...PORTAL],
      'insurance.item': [one('benefit-source')],
    },
  },
  {
    id: 'eligibility-request',
    url: PROFILES.eligibilityRequest,
    type: 'CoverageEligibilityRequest',
    name: 'EligibilityRequest',
    title: 'Eligibility check request as stored',
    description:
      "The CoverageEligibilityRequest of a check as this service stores and serves it: the client's request with the id of the check, its Patient, insurer and other referenced resources contained (docs/request-mapping.md).",
    extensions: {},
    rules: [{ id: 'contained', path: 'contained', short: 'The resources the request refers to' }],
  },
  {
    id: 'portal-coverage',
    url: PROFILES.portalCoverage,
    type: 'Coverage',
    name: 'PortalCoverage',
    title: 'Coverage as the payer portal gives it',
    description:
      'The Coverage a CoverageEligibilityResponse contains for a payer that found the member: the member and card numbers, the policy period, plan and network, and the policy facts Coverage has no element for (policy-details).',
    extensions: { '': [one('policy-details')] },
  },
  {
    id: 'estimate-claim-response',
    url: PROFILES.estimateClaimResponse,
    type: 'ClaimResponse',
    name: 'EstimateClaimResponse',
    title: "The patient's share, estimated",
    description:
      "What $estimate answers: the patient's share of the fees given, estimated from a final found-member CoverageEligibilityResponse (a predetermination, not the payer's adjudication; docs/estimate.md).",
    extensions: {},
    rules: [{ id: 'use', path: 'use', fixedCode: 'predetermination' }],
  },
];

/** "portal-message" -> "portalMessage": the slice name of an extension. */
function sliceName(id: string): string {
  return id.replace(/-([a-z])/g, (_m, c: string) => c.toUpperCase());
}

function extensionSlices(type: string, below: string, allowed: Allowed[]): ElementDefinition[] {
  const path = below === '' ? `${type}.extension` : `${type}.${below}.extension`;
  return [
    {
      id: path,
      path,
      slicing: { discriminator: [{ type: 'value', path: 'url' }], ordered: false, rules: 'open' },
    },
    ...allowed.map((a): ElementDefinition => ({
      id: `${path}:${sliceName(a.id)}`,
      path,
      sliceName: sliceName(a.id),
      min: 0,
      max: a.max,
      type: [{ code: 'Extension', profile: [canonical('StructureDefinition', a.id)] }],
    })),
  ];
}

function profile(spec: ProfileSpec, common: CommonFields): StructureDefinition {
  const prefixed = (e: ElementDefinition): ElementDefinition => ({
    ...e,
    id: `${spec.type}.${e.id ?? ''}`,
    path: `${spec.type}.${e.path}`,
  });
  const elements: ElementDefinition[] = [
    { id: spec.type, path: spec.type, short: spec.title, definition: spec.description },
    ...Object.entries(spec.extensions).flatMap(([below, allowed]) =>
      extensionSlices(spec.type, below, allowed),
    ),
    ...(spec.rules ?? []).map(prefixed),
  ];
  return {
    resourceType: 'StructureDefinition',
    id: spec.id,
    url: spec.url,
    ...common,
    name: spec.name,
    title: spec.title,
    description: spec.description,
    fhirVersion: '4.0.1',
    kind: 'resource',
    abstract: false,
    type: spec.type,
    baseDefinition: `http://hl7.org/fhir/StructureDefinition/${spec.type}`,
    derivation: 'constraint',
    differential: { element: elements },
  };
}

/** The profiles (differentials), in a fixed order. */
export function profileDefinitions(common: CommonFields): StructureDefinition[] {
  return SPECS.map((spec) => profile(spec, common));
}
