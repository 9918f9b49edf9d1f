/**
 * The one HTTP client that reads from a CDS Client's FHIR server (CDS Hooks 2.0, "FHIR Resource
 * Access": https://cds-hooks.hl7.org/2.0/#fhir-resource-access), guarded against SSRF: a request
 * goes out only to a URL under one of the calling client's registered `fhirServers` prefixes
 * (compared on the parsed URL by scheme, host, port and whole path segments), a redirect is
 * followed only to a URL that passes the same test (so never to another origin), and every read
 * is bounded in time and size. Anything else is a FhirServerError, which the hooks answer as 412.
 */
import type { Resource } from 'fhir/r4.js';
import { Agent, request } from 'undici';
import { endpointAllowed } from '../../notifications/subscription-input.js';
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

export interface FhirServerLimits {
  /** Whole exchange, redirects included. */
  timeoutMs: number;
  /** Largest body read. */
  maxBytes: number;
  /** Redirects followed (each to a registered URL). */
  maxRedirects: number;
}

const DEFAULT_FHIR_SERVER_LIMITS: FhirServerLimits = {
  timeoutMs: 3000,
  maxBytes: 2 * 1024 * 1024,
  maxRedirects: 2,
};

/** Whether `fhirServer` (the request's) lies under one of the client's registered prefixes. */
export function fhirServerAllowed(fhirServer: string | undefined, prefixes: readonly string[]): boolean {
  return fhirServer !== undefined && endpointAllowed(fhirServer.replace(/\/+$/, ''), prefixes);
}

/** Reads FHIR JSON from registered servers only. One per process (its connections are shared). */
export class GuardedFhirClient {
  // undici's request never follows a redirect by itself: each one is checked here first.
  private readonly agent = new Agent({ connections: 32, keepAliveTimeout: 10_000 });

  constructor(private readonly limits: FhirServerLimits = DEFAULT_FHIR_SERVER_LIMITS) {}

  /**
   * GETs `url` with the EHR's access token; resolves to the parsed JSON object. Refuses (before any
   * request) a URL outside `prefixes`.
   */
  async read(url: string, prefixes: readonly string[], accessToken: string | undefined): Promise<unknown> {
    const signal = AbortSignal.timeout(this.limits.timeoutMs);
    let target = url;
    for (let hop = 0; hop <= this.limits.maxRedirects; hop += 1) {
      if (!endpointAllowed(target, prefixes))
        throw new FhirServerError('not-registered', 'The FHIR server is not registered for this CDS client');
      const answer = await this.get(target, accessToken, signal);
      if (answer.location === undefined) return answer.body;
      target = new URL(answer.location, target).href;
    }
    throw new FhirServerError('status', 'The FHIR server redirected too many times');
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

  private async get(
    url: string,
    accessToken: string | undefined,
    signal: AbortSignal,
  ): Promise<{ body?: unknown; location?: string }> {
    let response: Awaited<ReturnType<typeof request>>;
    try {
      response = await request(url, {
        method: 'GET',
        dispatcher: this.agent,
        signal,
        headers: {
          accept: 'application/fhir+json, application/json',
          ...(accessToken ? { authorization: `Bearer ${accessToken}` } : {}),
        },
      });
    } catch (error) {
      throw failureOf(error, signal);
    }
    const { statusCode, headers, body } = response;
    if (statusCode >= 300 && statusCode < 400 && typeof headers.location === 'string') {
      await body.dump().catch(() => undefined);
      return { location: headers.location };
    }
    if (statusCode !== 200) {
      await body.dump().catch(() => undefined);
      throw new FhirServerError('status', `The FHIR server answered HTTP ${statusCode}`, statusCode);
    }
    const declared = Number(headers['content-length'] ?? '0');
    if (declared > this.limits.maxBytes) {
      body.destroy();
      throw new FhirServerError('too-large', 'The FHIR server answer is too large');
    }
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of body) {
        size += (chunk as Buffer).length;
        if (size > this.limits.maxBytes) {
          body.destroy();
          throw new FhirServerError('too-large', 'The FHIR server answer is too large');
        }
        chunks.push(chunk as Buffer);
      }
    } catch (error) {
      if (error instanceof FhirServerError) throw error;
      throw failureOf(error, signal);
    }
    try {
      const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
        throw new Error('not an object');
      return { body: parsed };
    } catch {
      throw new FhirServerError('not-fhir', 'The FHIR server did not answer FHIR JSON');
    }
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

function failureOf(error: unknown, signal: AbortSignal): FhirServerError {
  if (signal.aborted) return new FhirServerError('timeout', 'The FHIR server did not answer in time');
  const code = (error as { code?: unknown } | null)?.code;
  return new FhirServerError(
    'unreachable',
    `The FHIR server could not be reached${typeof code === 'string' ? ` (${code})` : ''}`,
  );
}
