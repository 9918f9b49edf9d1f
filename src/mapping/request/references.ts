/**
 * Resolves the references of a submitted request (https://hl7.org/fhir/R4/references.html):
 * contained (`#id`), Bundle entries (by `fullUrl`, or a relative `Type/id` matching the end of a
 * fullUrl), logical (`Reference.identifier`), and literal ones through the EHR's FHIR server
 * when SOURCE_FHIR_BASE_URL is configured. Every failure is a 422 naming the reference element,
 * worded for the person at the front desk; the resolver's own error goes to `diagnostics`.
 */
import type { BundleEntry, FhirResource, Identifier, Reference, Resource } from 'fhir/r4.js';
import { OperationOutcomeError, outcome, unprocessable, type IssueType } from '../../fhir/outcomes.js';
import { ReferenceResolutionError, type ReferenceResolver } from './resolver.js';
import { list } from './submit-body.js';

/** A resource a reference led to, and its FHIRPath in the body (`<reference>.resolve()` when fetched). */
export interface FoundResource {
  kind: 'resource';
  resource: FhirResource;
  path: string;
  via: 'contained' | 'bundle' | 'literal';
  /** The literal reference as sent, when `via` is literal. */
  reference?: string;
}

/** A logical reference: only an identifier (and maybe a display). */
export interface LogicalTarget {
  kind: 'logical';
  identifier: Identifier;
  display?: string;
  path: string;
}

export type Target = FoundResource | LogicalTarget;

/** Where `#id` references are looked up: the resource holding `contained`, and its path. */
export interface Scope {
  container: Resource;
  path: string;
}

/** The part of a check's input that references resolve against. */
export interface ResolutionContext {
  bundle?: { entries: readonly BundleEntry[]; path: string };
  resolver?: ReferenceResolver;
  /** One fetch per literal reference per $submit. */
  cache: Map<string, Promise<Resource>>;
}

/** The reference element: its FHIRPath, a label a front desk understands, the resource types allowed. */
export interface Element {
  path: string;
  label: string;
  types: readonly string[];
}

/**
 * Resolves one reference. Returns undefined when the reference is absent or display-only;
 * throws a 422 OperationOutcomeError when it cannot be followed.
 */
export async function resolveReference(
  ref: Reference | undefined,
  element: Element,
  scope: Scope,
  context: ResolutionContext,
): Promise<Target | undefined> {
  if (!ref) return undefined;
  const literal = ref.reference;
  if (literal === undefined) return logical(ref, element);
  const found = literal.startsWith('#') ? fromContained(literal, scope) : fromBundle(literal, context.bundle);
  if (found) return checked({ kind: 'resource', ...found }, element);
  if (literal.startsWith('#'))
    throw unprocessable(
      `The ${element.label} reference names no contained resource`,
      element.path,
      'not-found',
    );
  if (context.bundle && /^urn:(uuid|oid):/.test(literal))
    throw unprocessable(
      `The ${element.label} reference matches no Bundle entry fullUrl`,
      element.path,
      'not-found',
    );
  if (!context.resolver) {
    // A literal reference also carrying an identifier can still be used logically.
    if (ref.identifier) return logical(ref, element);
    throw unprocessable(
      `The ${element.label} is given as a reference to another system. Send it contained, in a Bundle, or as an identifier: looking up literal references needs SOURCE_FHIR_BASE_URL, which is not configured`,
      element.path,
      'not-supported',
    );
  }
  const resource = await fetchLiteral(literal, element, context);
  return checked(
    {
      kind: 'resource',
      resource: resource as FhirResource,
      path: `${element.path}.resolve()`,
      via: 'literal',
      reference: literal,
    },
    element,
  );
}

function logical(ref: Reference, element: Element): LogicalTarget | undefined {
  if (!ref.identifier) return undefined;
  return {
    kind: 'logical',
    identifier: ref.identifier,
    ...(ref.display ? { display: ref.display } : {}),
    path: `${element.path}.identifier`,
  };
}

function fromContained(literal: string, scope: Scope): Omit<FoundResource, 'kind'> | undefined {
  const contained = list((scope.container as { contained?: Resource[] }).contained);
  const index = contained.findIndex((r) => r.id === literal.slice(1));
  const resource = contained[index];
  return resource
    ? { resource: resource as FhirResource, path: `${scope.path}.contained[${index}]`, via: 'contained' }
    : undefined;
}

function fromBundle(
  literal: string,
  bundle: ResolutionContext['bundle'],
): Omit<FoundResource, 'kind'> | undefined {
  if (!bundle) return undefined;
  const index = findBundleEntry(bundle.entries, literal);
  const resource = index === undefined ? undefined : bundle.entries[index]?.resource;
  return resource && index !== undefined
    ? { resource: resource as FhirResource, path: `${bundle.path}.entry[${index}].resource`, via: 'bundle' }
    : undefined;
}

const RELATIVE = /^[A-Z][A-Za-z]+\/[A-Za-z0-9\-.]{1,64}$/;

/** Index of the Bundle entry a reference points at: exact fullUrl, else relative `Type/id` matching a fullUrl's end. */
export function findBundleEntry(entries: readonly BundleEntry[], literal: string): number | undefined {
  const exact = entries.findIndex((e) => e.fullUrl === literal && e.resource);
  if (exact >= 0) return exact;
  const relative = literal.replace(/\/_history\/[^/]+$/, '');
  if (!RELATIVE.test(relative)) return undefined;
  const index = entries.findIndex(
    (e) =>
      e.resource &&
      (e.fullUrl?.endsWith(`/${relative}`) ||
        (!e.fullUrl && `${e.resource.resourceType}/${e.resource.id ?? ''}` === relative)),
  );
  return index >= 0 ? index : undefined;
}

function checked(found: FoundResource, element: Element): FoundResource {
  if (!element.types.includes(found.resource.resourceType))
    throw unprocessable(
      `The ${element.label} reference points to a ${found.resource.resourceType}; expected ${element.types.join(' or ')}`,
      element.path,
      'value',
    );
  return found;
}

async function fetchLiteral(
  literal: string,
  element: Element,
  context: ResolutionContext,
): Promise<Resource> {
  const resolver = context.resolver as ReferenceResolver;
  let pending = context.cache.get(literal);
  if (!pending) {
    pending = resolver.resolve(literal);
    context.cache.set(literal, pending);
  }
  try {
    return await pending;
  } catch (error) {
    throw resolutionFailure(error, literal, element);
  }
}

const FAILURE_TEXT: Record<string, { code: IssueType; text: (label: string) => string }> = {
  'not-found': {
    code: 'not-found',
    text: (label) =>
      `The ${label} record was not found in the clinic's record system. Check it still exists, then submit again.`,
  },
  'not-allowed': {
    code: 'value',
    text: (label) =>
      `The ${label} reference points outside the clinic's record system, so it cannot be looked up. Send the ${label} contained or as an identifier.`,
  },
  timeout: {
    code: 'transient',
    text: (label) =>
      `The clinic's record system took too long to return the ${label} record. Try again in a moment.`,
  },
  unreachable: {
    code: 'transient',
    text: (label) =>
      `The clinic's record system could not be reached to look up the ${label}. Try again in a moment.`,
  },
};
const DEFAULT_FAILURE = {
  code: 'processing' as IssueType,
  text: (label: string) =>
    `The clinic's record system could not return the ${label} record. Try again, or ask the administrator to check the connection.`,
};

function resolutionFailure(error: unknown, literal: string, element: Element): OperationOutcomeError {
  const reason = error instanceof ReferenceResolutionError ? error.reason : 'unexpected';
  const row = FAILURE_TEXT[reason] ?? DEFAULT_FAILURE;
  const diagnostics =
    error instanceof ReferenceResolutionError ? `${error.reason}: ${error.message}` : 'resolver failed';
  return new OperationOutcomeError(
    outcome(row.code, row.text(element.label), { expression: [element.path], diagnostics }),
    422,
  );
}

/** Scope for `#id` references inside a found resource: contained ones share their container's. */
export function scopeOf(found: FoundResource, requestScope: Scope): Scope {
  return found.via === 'contained' ? requestScope : { container: found.resource, path: found.path };
}
