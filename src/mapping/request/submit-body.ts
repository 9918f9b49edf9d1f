/**
 * The three accepted $submit bodies (https://hl7.org/fhir/R4/coverageeligibilityrequest-operation-submit.html):
 * a CoverageEligibilityRequest with its resources contained, a `collection` Bundle holding exactly
 * one CoverageEligibilityRequest plus the resources it references, or Parameters whose `resource`
 * part holds either. Anything else, or invalid FHIR, is a 400 with FHIRPath expressions relative
 * to the body as sent.
 */
import type { BundleEntry, CoverageEligibilityRequest, FhirResource } from 'fhir/r4.js';
import { badRequest, OperationOutcomeError, outcomeOf, structureError } from '../../fhir/outcomes.js';
import { echo } from '../../fhir/text.js';
import { validateFhir } from '../../fhir/validator.js';

/** A submitted request and where it sits in the body. */
export interface SubmitBody {
  /** The request as sent (validated FHIR). */
  request: CoverageEligibilityRequest;
  /** FHIRPath of the request in the body: `CoverageEligibilityRequest`, `Bundle.entry[1].resource`, ... */
  path: string;
  /** The Bundle the request came in, if any. */
  bundle?: { entries: readonly BundleEntry[]; path: string };
}

/**
 * An array element of the body as an array. The validator accepts a single object where a
 * complex-type array is expected, so the mapper never assumes the shape: anything else is empty.
 */
export function list<T>(value: readonly T[] | T | undefined | null): readonly T[] {
  return Array.isArray(value) ? (value as readonly T[]) : [];
}

const SHAPES =
  'a CoverageEligibilityRequest, a collection Bundle holding one, or Parameters with a resource part';

/** Checks the body is one of the three shapes and valid FHIR; throws a 400 OperationOutcomeError otherwise. */
export function readSubmitBody(body: unknown): SubmitBody {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw structureError(`The body must be a FHIR resource: ${SHAPES}`, 'resourceType');
  const resourceType = (body as { resourceType?: unknown }).resourceType;
  if (!isShape(resourceType))
    throw badRequest(
      `Expected ${SHAPES}; got ${typeof resourceType === 'string' ? echo(resourceType) : 'no resourceType'}`,
      'resourceType',
    );
  // Checked before validation so a transaction Bundle is told its type, not a bdl-3 invariant.
  const bundleType = (body as { type?: unknown }).type;
  if (resourceType === 'Bundle' && typeof bundleType === 'string' && bundleType !== 'collection')
    throw badRequest(`The Bundle must be of type collection; got ${echo(bundleType)}`, 'Bundle.type');
  const { valid, issues } = validateFhir(body, { containedMustBeReferenced: false });
  if (!valid) throw new OperationOutcomeError(outcomeOf(issues), 400);
  return unwrap(body as FhirResource, resourceType);
}

function isShape(value: unknown): value is 'CoverageEligibilityRequest' | 'Bundle' | 'Parameters' {
  return value === 'CoverageEligibilityRequest' || value === 'Bundle' || value === 'Parameters';
}

function unwrap(resource: FhirResource, path: string): SubmitBody {
  if (resource.resourceType === 'CoverageEligibilityRequest') return { request: resource, path };
  if (resource.resourceType === 'Bundle') return fromBundle(resource.type, list(resource.entry), path);
  if (resource.resourceType !== 'Parameters' || path !== 'Parameters')
    throw badRequest(`Expected ${SHAPES}; got ${echo(resource.resourceType)}`, `${path}.resourceType`);
  const parameters = list(resource.parameter);
  const index = parameters.findIndex((p) => p.name === 'resource');
  const inner = parameters[index]?.resource as FhirResource | undefined;
  if (!inner)
    throw structureError(
      'Parameters must have a parameter named "resource" holding the CoverageEligibilityRequest',
      'Parameters.parameter',
    );
  const innerPath = `Parameters.parameter[${index}].resource`;
  if (inner.resourceType !== 'CoverageEligibilityRequest' && inner.resourceType !== 'Bundle')
    throw badRequest(
      `The resource parameter must hold a CoverageEligibilityRequest or a Bundle; got ${echo(inner.resourceType)}`,
      `${innerPath}.resourceType`,
    );
  return unwrap(inner, innerPath);
}

function fromBundle(type: string, entries: readonly BundleEntry[], path: string): SubmitBody {
  if (type !== 'collection')
    throw badRequest(`The Bundle must be of type collection; got ${echo(type)}`, `${path}.type`);
  const found = entries.flatMap((entry, index) =>
    entry.resource?.resourceType === 'CoverageEligibilityRequest'
      ? [{ request: entry.resource as CoverageEligibilityRequest, index }]
      : [],
  );
  const [first, second] = found;
  if (!first)
    throw structureError(
      'The Bundle must hold one CoverageEligibilityRequest; it holds none',
      `${path}.entry`,
    );
  if (second)
    throw structureError(
      'The Bundle must hold exactly one CoverageEligibilityRequest; send one check per Bundle',
      `${path}.entry[${second.index}].resource`,
    );
  return {
    request: first.request,
    path: `${path}.entry[${first.index}].resource`,
    bundle: { entries, path },
  };
}
