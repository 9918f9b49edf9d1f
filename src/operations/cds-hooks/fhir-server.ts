/**
 * The one HTTP client that reads from a CDS Client's FHIR server (CDS Hooks 2.0, "FHIR Resource
 * Access": https://cds-hooks.hl7.org/2.0/#fhir-resource-access), guarded against SSRF: a request
 * goes out only to a URL under one of the calling client's registered `fhirServers` prefixes
 * (compared on the parsed URL by scheme, host, port and whole path segments), a redirect is
 * followed only to a URL that passes the same test (so never to another origin), and every read
 * is bounded in time and size. Anything else is a FhirServerError, which the hooks answer as 412.
 */
import type { Resource } from 'fhir/r4.js';
import { endpointAllowed } from '../../ehr/addresses.js';
import { DEFAULT_EHR_LIMITS, EhrError, EhrHttp, type EhrLimits } from '../../ehr/http.js';
import { parseLiteralReference, ReferenceResolutionError } from '../../mapping/request/resolver.js';
import type { ReferenceResolver } from '../../mapping/request/resolver.js';

/** Why a read from the FHIR server failed; no URL, token or body in it. */
export class FhirServerError extends Error {
  constructor(
    readonly reason: 'not-registered' | 'unreachable' | 'timeout' | 'too-large' | 'status' | 'not-fhir',
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'FhirServerError';
  }
}

export type FhirServerLimits = EhrLimits;

/** Whether `fhirServer` (the request's) lies under one of the client's registered prefixes. */
export function fhirServerAllowed(fhirServer: string | undefined, prefixes: readonly string[]): boolean {
  return fhirServer !== undefined && endpointAllowed(fhirServer.replace(/\/+$/, ''), prefixes);
}

/**
 * Reads FHIR JSON from registered servers only, through the EHR client's guarded exchange
 * (src/ehr/http.ts: addresses, redirects, time and size). One per process.
 */
export class GuardedFhirClient {
  private readonly http: EhrHttp;

  constructor(limits: FhirServerLimits = DEFAULT_EHR_LIMITS) {
    this.http = new EhrHttp(limits);
  }

  /**
   * GETs `url` with the EHR's access token; resolves to the parsed JSON object. Refuses (before any
   * request) a URL outside `prefixes`.
   */
  async read(url: string, prefixes: readonly string[], accessToken: string | undefined): Promise<unknown> {
    try {
      return await this.http.json(url, { allowed: prefixes, accessToken });
    } catch (error) {
      if (!(error instanceof EhrError)) throw error;
      if (error.reason === 'not-allowed')
        throw new FhirServerError('not-registered', 'The FHIR server is not registered for this CDS client');
      if (error.reason === 'not-fhir')
        throw new FhirServerError('not-fhir', 'The FHIR server did not answer FHIR JSON');
      throw new FhirServerError(error.reason, error.message, error.status);
    }
  }

  /** A resolver of literal references (`Organization/1`) against one registered server. */
  resolver(
    fhirServer: string,
    prefixes: readonly string[],
    accessToken: string | undefined,
  ): ReferenceResolver {
    const base = fhirServer.replace(/\/+$/, '');
    return {
      resolve: async (reference) => {
        const target = parseLiteralReference(reference, base);
        try {
          const body = await this.read(`${base}/${target.resourceType}/${target.id}`, prefixes, accessToken);
          if ((body as { resourceType?: unknown }).resourceType !== target.resourceType)
            throw new FhirServerError('not-fhir', `The server did not answer a ${target.resourceType}`);
          return body as Resource;
        } catch (error) {
          const failure = error as FhirServerError;
          const reason =
            failure.reason === 'timeout'
              ? 'timeout'
              : failure.reason === 'unreachable'
                ? 'unreachable'
                : failure.status === 404 || failure.status === 410
                  ? 'not-found'
                  : failure.reason === 'not-registered'
                    ? 'not-allowed'
                    : 'server-error';
          throw new ReferenceResolutionError(reason, reference, failure.message, failure.status);
        }
      },
    };
  }

  close(): Promise<void> {
    return this.http.close();
  }
}
