/**
 * Resolution of literal references (`Patient/123`, `https://ehr.example/fhir/Patient/123`)
 * against the EHR's FHIR server (SOURCE_FHIR_BASE_URL), with fhir-kit-client.
 * Only relative `Type/id[/_history/v]` references and absolute URLs under the configured base
 * are fetched: the adapter never follows a reference to an arbitrary host.
 */
import type { Resource } from 'fhir/r4.js';
import type { Client } from 'fhir-kit-client';

/** Looks a literal reference up. Throws ReferenceResolutionError; never anything else. */
export interface ReferenceResolver {
  resolve(reference: string): Promise<Resource>;
}

export type ResolutionFailure =
  /** The server answered 404 or 410. */
  | 'not-found'
  /** Not a `Type/id` reference, or an absolute URL outside the configured base. */
  | 'not-allowed'
  /** No connection (DNS, refused, reset). */
  | 'unreachable'
  | 'timeout'
  /** The server answered another error status. */
  | 'server-error'
  /** The answer was not the resource asked for. */
  | 'invalid-response';

/** Why a literal reference could not be resolved. `message` carries no stack or body. */
export class ReferenceResolutionError extends Error {
  constructor(
    readonly reason: ResolutionFailure,
    readonly reference: string,
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'ReferenceResolutionError';
  }
}

const RELATIVE = /^([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/([A-Za-z0-9\-.]{1,64}))?$/;

interface Target {
  resourceType: string;
  id: string;
  version?: string;
}

function withoutUserinfo(url: string): string {
  try {
    const parsed = new URL(url);
    parsed.username = '';
    parsed.password = '';
    return parsed.toString().replace(/\/$/, '');
  } catch {
    return 'the EHR server';
  }
}

/** `Type/id[/_history/v]`, relative or absolute under `base`; anything else is not allowed. */
export function parseLiteralReference(reference: string, base: string): Target {
  const relative = reference.startsWith(`${base}/`) ? reference.slice(base.length + 1) : reference;
  const match = RELATIVE.exec(relative);
  if (!match?.[1] || !match[2])
    throw new ReferenceResolutionError(
      'not-allowed',
      reference,
      // The server's origin and path only: a user:password part of the URL never reaches an answer.
      `Only Type/id references or URLs under ${withoutUserinfo(base)} are looked up`,
    );
  return { resourceType: match[1], id: match[2], ...(match[3] ? { version: match[3] } : {}) };
}

/** A resolver reading from the FHIR server at `baseUrl` (fhir-kit-client). */
export function createFhirKitResolver(
  baseUrl: string,
  options: { timeoutMs?: number } = {},
): ReferenceResolver {
  const base = baseUrl.replace(/\/+$/, '');
  const timeoutMs = options.timeoutMs ?? 5000;
  // fhir-kit-client is loaded on first use: a service without SOURCE_FHIR_BASE_URL never needs
  // it, and it is not on the start-up path (bench/README.md, figure 4).
  let client: Promise<Client> | undefined;
  const clientOf = (): Promise<Client> =>
    (client ??= import('fhir-kit-client').then(
      ({ Client: FhirKitClient }) =>
        new FhirKitClient({ baseUrl: base, customHeaders: { accept: 'application/fhir+json' } }),
    ));
  return {
    async resolve(reference: string): Promise<Resource> {
      const target = parseLiteralReference(reference, base);
      const client = await clientOf();
      const requestOptions = { signal: AbortSignal.timeout(timeoutMs) };
      let resource: unknown;
      try {
        resource = target.version
          ? await client.vread({ ...target, version: target.version, options: requestOptions })
          : await client.read({ resourceType: target.resourceType, id: target.id, options: requestOptions });
      } catch (error) {
        throw classify(error, reference);
      }
      const resourceType = (resource as { resourceType?: unknown } | null)?.resourceType;
      if (resourceType !== target.resourceType)
        throw new ReferenceResolutionError(
          'invalid-response',
          reference,
          `The server answered ${String(resourceType)} instead of ${target.resourceType}`,
        );
      return resource as Resource;
    },
  };
}

/** Turns whatever fhir-kit-client or fetch threw into a typed failure. */
function classify(error: unknown, reference: string): ReferenceResolutionError {
  const status = (error as { response?: { status?: unknown } } | null)?.response?.status;
  if (typeof status === 'number') {
    if (status === 404 || status === 410)
      return new ReferenceResolutionError('not-found', reference, `HTTP ${status}`, status);
    if (status < 400)
      return new ReferenceResolutionError('invalid-response', reference, 'The answer was not JSON', status);
    return new ReferenceResolutionError('server-error', reference, `HTTP ${status}`, status);
  }
  const name = (error as { name?: unknown } | null)?.name;
  if (name === 'TimeoutError' || name === 'AbortError')
    return new ReferenceResolutionError('timeout', reference, 'The FHIR server did not answer in time');
  const cause = (error as { cause?: { code?: unknown } } | null)?.cause?.code;
  return new ReferenceResolutionError(
    'unreachable',
    reference,
    `The FHIR server could not be reached${typeof cause === 'string' ? ` (${cause})` : ''}`,
  );
}
