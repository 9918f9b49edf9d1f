/**
 * The OperationDefinitions of $submit and $validate on CoverageEligibilityRequest
 * (https://hl7.org/fhir/R4/operationdefinition.html), and the profile on Parameters their
 * `inputProfile` names: what each takes and answers, as the README and docs/batch-and-reuse.md say.
 * Served at /fhir/OperationDefinition/{id} and /fhir/StructureDefinition/{id}, named by the
 * CapabilityStatement's operations.
 */
import type { OperationDefinition, StructureDefinition } from 'fhir/r4.js';
import { canonical } from '../../fhir/canonical.js';

/** Ids of the published OperationDefinitions (the CapabilityStatement names them). */
export const SUBMIT_OPERATION_ID = 'CoverageEligibilityRequest-submit';
export const VALIDATE_OPERATION_ID = 'CoverageEligibilityRequest-validate';
export const ESTIMATE_OPERATION_ID = 'CoverageEligibilityResponse-estimate';
const INPUT_PROFILE_ID = 'submit-parameters';

/** The fields every conformance resource of this service shares (version, status, publisher). */
export interface CommonFields {
  version: string;
  /** The date of this version of the conformance resources (never a clock reading). */
  date: string;
  status: 'active';
  publisher: string;
}

const INPUT_DOC =
  'The request: a CoverageEligibilityRequest with its Patient and insurer Organization contained, a collection Bundle whose first entry is the request, or (in Parameters) the request as the `resource` parameter. Rules: docs/request-mapping.md.';

/**
 * inputProfile (operationdefinition-definitions.html#OperationDefinition.inputProfile): a profile
 * on the Parameters resource as a whole, for a client that sends the request as Parameters.
 */
function inputProfile(common: CommonFields): StructureDefinition {
  return {
    resourceType: 'StructureDefinition',
    id: INPUT_PROFILE_ID,
    url: canonical('StructureDefinition', INPUT_PROFILE_ID),
    ...common,
    name: 'SubmitParameters',
    title: 'Input of $submit and $validate',
    description: `Parameters with one parameter, resource. ${INPUT_DOC}`,
    fhirVersion: '4.0.1',
    kind: 'resource',
    abstract: false,
    type: 'Parameters',
    baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Parameters',
    derivation: 'constraint',
    differential: {
      element: [
        { id: 'Parameters', path: 'Parameters' },
        { id: 'Parameters.parameter', path: 'Parameters.parameter', min: 1, max: '1' },
        { id: 'Parameters.parameter.name', path: 'Parameters.parameter.name', fixedString: 'resource' },
        { id: 'Parameters.parameter.resource', path: 'Parameters.parameter.resource', min: 1 },
      ],
    },
  };
}

function operation(
  common: CommonFields,
  id: string,
  fields: Pick<OperationDefinition, 'name' | 'title' | 'code' | 'description' | 'affectsState'> & {
    out: { type: 'Resource' | 'OperationOutcome'; documentation: string };
  },
): OperationDefinition {
  return {
    resourceType: 'OperationDefinition',
    id,
    url: canonical('OperationDefinition', id),
    ...common,
    kind: 'operation',
    name: fields.name,
    title: fields.title,
    description: fields.description,
    affectsState: fields.affectsState,
    code: fields.code,
    resource: ['CoverageEligibilityRequest'],
    system: false,
    type: true,
    instance: false,
    inputProfile: canonical('StructureDefinition', INPUT_PROFILE_ID),
    parameter: [
      { name: 'resource', use: 'in', min: 1, max: '1', type: 'Resource', documentation: INPUT_DOC },
      {
        name: 'return',
        use: 'out',
        min: 1,
        max: '1',
        type: fields.out.type,
        documentation: fields.out.documentation,
      },
    ],
  };
}

/**
 * $estimate on a stored CER (instance level): the patient's share of the fees given, as a
 * ClaimResponse; it reads the CER only (affectsState false). docs/estimate.md.
 */
function estimateOperation(common: CommonFields): OperationDefinition {
  return {
    resourceType: 'OperationDefinition',
    id: ESTIMATE_OPERATION_ID,
    url: canonical('OperationDefinition', ESTIMATE_OPERATION_ID),
    ...common,
    kind: 'operation',
    name: 'Estimate',
    title: "The patient's share of a fee, from an eligibility answer",
    description:
      "From a final CoverageEligibilityResponse of a found member whose coverage is in force (else 422), the patient's share of each fee: a ClaimResponse (use predetermination) with the adjudications submitted, copay and benefit per item and in total, a processNote per assumption, and no share where the answer has no figures. An estimate, not the payer's adjudication. Never calls the payer portal service; the CER is unchanged.",
    affectsState: false,
    code: 'estimate',
    resource: ['CoverageEligibilityResponse'],
    system: false,
    type: false,
    instance: true,
    parameter: [
      {
        name: 'item',
        use: 'in',
        min: 1,
        max: '*',
        documentation: 'One fee to estimate.',
        part: [
          {
            name: 'category',
            use: 'in',
            min: 1,
            max: '1',
            type: 'Coding',
            documentation: `The service category: ${canonical('CodeSystem', 'service-category')} or http://terminology.hl7.org/CodeSystem/ex-benefitcategory.`,
          },
          {
            name: 'fee',
            use: 'in',
            min: 1,
            max: '1',
            type: 'Money',
            documentation: 'The fee, in AED, at most 2 decimals.',
          },
        ],
      },
      {
        name: 'return',
        use: 'out',
        min: 1,
        max: '1',
        type: 'ClaimResponse',
        documentation: 'The estimate (docs/estimate.md).',
      },
    ],
  };
}

/** The OperationDefinitions and the input profile of $submit and $validate. */
export function operationResources(common: CommonFields): Array<OperationDefinition | StructureDefinition> {
  return [
    operation(common, SUBMIT_OPERATION_ID, {
      name: 'Submit',
      title: 'Check eligibility at the payer portal',
      code: 'submit',
      affectsState: true,
      description:
        'One eligibility check at a payer portal. Answers the CoverageEligibilityResponse (final, or queued while the check runs; Location = its URL), or an OperationOutcome where no determination was made; 202 with Prefer: respond-async. A recent found-member answer to the same question is given again (Age header) unless Cache-Control: no-cache. Many at once: POST a batch Bundle of $submit entries to the base.',
      out: {
        type: 'Resource',
        documentation:
          'The CoverageEligibilityResponse, or an OperationOutcome (README, "Answers of $submit").',
      },
    }),
    operation(common, VALIDATE_OPERATION_ID, {
      name: 'Validate',
      title: 'Dry run of $submit',
      code: 'validate',
      affectsState: false,
      description:
        'Takes every body $submit takes and answers 200 with an OperationOutcome: an error for everything $submit would refuse (same code and expression), warnings and information for what would happen now (payer guard, backoff, queue ahead, an answer that would be reused, an unknown payer code), one information issue when all is well. Never calls the payer portal service, never stores a check.',
      out: { type: 'OperationOutcome', documentation: 'The issues found; 200 whatever they are.' },
    }),
    estimateOperation(common),
    inputProfile(common),
  ];
}
