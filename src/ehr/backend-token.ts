/**
 * SMART Backend Services as a client
 * (https://hl7.org/fhir/smart-app-launch/backend-services.html): the token endpoint read from
 * `<fhirBaseUrl>/.well-known/smart-configuration`, then `client_credentials` with a
 * `private_key_jwt` client assertion (`iss` = `sub` = clientId, `aud` = the token endpoint, a
 * fresh `jti`, `exp` at most 5 minutes ahead, the key's `kid` in the header). The access token is
 * kept until shortly before it expires, so a round of many reads asks for it once.
 */
import { randomUUID } from 'node:crypto';
import { importJWK, SignJWT, type JWK } from 'jose';
import { z } from 'zod';
import type { EhrSchedule } from '../config.js';
import { EhrError, type EhrHttp } from './http.js';

/** The assertion's life: at most five minutes, as the profile asks; a little less for clock skew. */
const ASSERTION_SECONDS = 240;
/** A token is asked for again this long before it expires (a round's reads never end with one). */
const RENEW_BEFORE_MS = 60_000;
/** A token endpoint that gives no expires_in: kept this long. */
const DEFAULT_TOKEN_SECONDS = 300;

const smartConfiguration = z.object({ token_endpoint: z.string().url() });
const tokenAnswer = z.object({
  access_token: z.string().min(1),
  token_type: z.string().refine((t) => t.toLowerCase() === 'bearer', 'token_type must be bearer'),
  expires_in: z.number().positive().optional(),
});

export interface BackendTokenOptions {
  now: () => number;
  /** Counts each token request (metrics, tests). */
  onTokenRequest?: () => void;
}

/** The Backend Services token of one EHR client (one tenant's ehrSchedule). */
export class BackendToken {
  private tokenEndpoint: string | null = null;
  private token: { value: string; renewAt: number } | null = null;
  private pending: Promise<string> | null = null;

  constructor(
    private readonly settings: Pick<EhrSchedule, 'fhirBaseUrl' | 'clientId' | 'clientKeys' | 'scope'>,
    private readonly http: EhrHttp,
    private readonly options: BackendTokenOptions,
  ) {}

  /** The token endpoint, once read (null before the first token). Only it and fhirBaseUrl are called. */
  get endpoint(): string | null {
    return this.tokenEndpoint;
  }

  /** A token valid for a while yet: the kept one, else a new one (one request at a time). */
  async get(): Promise<string> {
    if (this.token && this.options.now() < this.token.renewAt) return this.token.value;
    this.pending ??= this.fetch().finally(() => {
      this.pending = null;
    });
    return this.pending;
  }

  /** Forgets the kept token (the server refused it: 401). */
  forget(): void {
    this.token = null;
  }

  private async fetch(): Promise<string> {
    const endpoint = await this.discover();
    const form = new URLSearchParams({
      grant_type: 'client_credentials',
      scope: this.settings.scope,
      client_assertion_type: 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer',
      client_assertion: await this.assertion(endpoint),
    });
    this.options.onTokenRequest?.();
    const asked = this.options.now();
    const body = await this.http.json(endpoint, {
      method: 'POST',
      allowed: [endpoint],
      form,
      label: 'The token endpoint',
    });
    const parsed = tokenAnswer.safeParse(body);
    if (!parsed.success) throw new EhrError('not-fhir', 'The token endpoint did not answer a bearer token');
    const lifeMs = (parsed.data.expires_in ?? DEFAULT_TOKEN_SECONDS) * 1000;
    this.token = {
      value: parsed.data.access_token,
      renewAt: asked + Math.max(lifeMs - RENEW_BEFORE_MS, lifeMs / 2),
    };
    return parsed.data.access_token;
  }

  /** `<fhirBaseUrl>/.well-known/smart-configuration`'s token_endpoint, read once. */
  private async discover(): Promise<string> {
    if (this.tokenEndpoint) return this.tokenEndpoint;
    const base = this.settings.fhirBaseUrl;
    const body = await this.http.json(`${base}/.well-known/smart-configuration`, {
      allowed: [base],
      label: 'The SMART configuration',
    });
    const parsed = smartConfiguration.safeParse(body);
    if (!parsed.success) throw new EhrError('not-fhir', 'The SMART configuration names no token_endpoint');
    const endpoint = parsed.data.token_endpoint;
    // https, or http only when the FHIR base itself is http (a loopback address: the tenants file).
    if (!endpoint.startsWith('https:') && !(endpoint.startsWith('http:') && base.startsWith('http:')))
      throw new EhrError('not-allowed', 'The token endpoint must be https');
    this.tokenEndpoint = endpoint;
    return endpoint;
  }

  private async assertion(audience: string): Promise<string> {
    const jwk = this.settings.clientKeys.keys[0]!;
    const key = await importJWK(jwk as JWK, jwk.alg);
    const now = Math.floor(this.options.now() / 1000);
    return new SignJWT({ jti: randomUUID() })
      .setProtectedHeader({ alg: jwk.alg, kid: jwk.kid, typ: 'JWT' })
      .setIssuer(this.settings.clientId)
      .setSubject(this.settings.clientId)
      .setAudience(audience)
      .setIssuedAt(now)
      .setExpirationTime(now + ASSERTION_SECONDS)
      .sign(key);
  }
}
