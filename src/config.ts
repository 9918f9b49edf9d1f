/**
 * Configuration: environment variables and the tenants file, exactly as named in the README
 * section 2, parsed with zod before the service listens. A wrong value stops the process with
 * one line naming the variable (ConfigError), never a stack trace.
 */
import { hash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { z } from 'zod';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** One tenant = one clinic. */
export interface Tenant {
  id: string;
  /** SHA-256 hex digests of the tenant's inbound API keys. */
  apiKeyHashes: string[];
  upstream: { apiKey: string; clinicId: string; clientId: string };
  practiceId: string;
  maxInFlight: number;
  /**
   * Slots of maxInFlight kept for desk work (docs/queue.md): background checks never hold them.
   * Absent: 1 when maxInFlight >= 2, else 0; at most maxInFlight - 1.
   */
  deskSlots?: number;
  /**
   * URL prefixes a Subscription's channel.endpoint must start with (docs/notifications.md); absent
   * or empty: the tenant cannot subscribe (no request goes to an address it did not register).
   */
  subscriptionEndpoints?: string[];
  /**
   * How long a final found-member answer is answered again instead of a new check (minutes; 0 =
   * never; absent = DEFAULT_REUSE_WINDOW_MINUTES). docs/batch-and-reuse.md.
   */
  reuseWindowMinutes?: number;
  /** SMART Backend Services clients of the tenant (docs/auth.md); absent = none. */
  smartClients?: SmartClient[];
  /**
   * Pre-visit checks (docs/previsit.md): the re-check runs this many minutes before an
   * appointment's start; absent = PREVISIT_LEAD_MINUTES.
   */
  previsitLeadMinutes?: number;
  /** Where a `servicedDate` appointment starts, `HH:MM` local time; absent = `08:00`. */
  previsitDayStart?: string;
  /** The clinic's IANA time zone (its day, its appointment times); absent = DEFAULT_TIME_ZONE. */
  timeZone?: string;
  /** CDS Hooks clients (EHRs) of the tenant (docs/cds-hooks.md); absent = none. */
  cdsClients?: CdsClient[];
  /**
   * People sign in to the page through this OpenID provider (docs/signin.md); the tenant's API
   * keys then no longer open /app/api. Absent: the page's API-key sign-in.
   */
  oidc?: OidcSettings;
  /** The page as a SMART app of the clinic's EHR (docs/smart-launch.md); absent = no launch. */
  smartLaunch?: SmartLaunch;
  /**
   * An Emirates ID whose check digit does not add up: refused before any upstream call (absent,
   * the default), or let through with a warning (`warn`). docs/request-mapping.md.
   */
  emiratesIdCheckDigit?: 'warn';
  /** The schedule read from the EHR's FHIR API (docs/ehr-schedule.md); absent = not read. */
  ehrSchedule?: EhrSchedule;
}

/**
 * Reading a clinic's schedule from its EHR's FHIR API as a SMART Backend Services client
 * (docs/ehr-schedule.md): where, as whom, how often and how far ahead.
 */
export interface EhrSchedule {
  /** https, or http to a loopback address; no trailing slash. */
  fhirBaseUrl: string;
  clientId: string;
  /** Private keys (RS384 or ES384), each with its kid; the first signs. */
  clientKeys: { keys: (Record<string, unknown> & { kid: string; alg: 'RS384' | 'ES384' })[] };
  scope: string;
  everyMinutes: number;
  daysAhead: number;
  /** Extra search parameters of the Appointment search (`location=Location/12`), as pairs. */
  search: [string, string][];
}

export const DEFAULT_EHR_SCHEDULE_SCOPE = 'system/Appointment.rs system/Patient.rs system/Coverage.rs';

/**
 * A tenant's OpenID Connect provider, the page's client at it, and which ID token claim carries
 * the person's roles. https://openid.net/specs/openid-connect-core-1_0.html
 */
export interface OidcSettings {
  /** The provider's issuer; its metadata is `<issuer>/.well-known/openid-configuration`. */
  issuer: string;
  clientId: string;
  /** client_secret_basic; or clientKeys for private_key_jwt. */
  clientSecret?: string;
  /** A JWKS of private keys (private_key_jwt, the first signs). */
  clientKeys?: { keys: Record<string, unknown>[] };
  /** The ID token claim with the person's roles (a list or one string); default `roles`. */
  rolesClaim: string;
  /** A person with one of these roles may use the operator actions. */
  operatorRoles: string[];
}

/**
 * The page registered as a SMART app in the clinic's EHR: the EHR FHIR bases it may be launched
 * from (`iss`), its client id there, and, for a confidential client, the private keys of its
 * private_key_jwt assertions (absent: a public client).
 * https://hl7.org/fhir/smart-app-launch/app-launch.html,
 * https://hl7.org/fhir/smart-app-launch/client-confidential-asymmetric.html
 */
export interface SmartLaunch {
  fhirBaseUrls: string[];
  clientId: string;
  /** Private JWKs (RS384 or ES384, each with its kid); the first signs. Never logged. */
  clientKeys?: { keys: Record<string, unknown>[] };
}

/**
 * An EHR registered to call the CDS Hooks services: the `iss` of its JWTs, its public keys (inline
 * JWKS or a URL) and the FHIR server URL prefixes it may send as `fhirServer` (the only addresses
 * a prefetch is ever fetched from). https://cds-hooks.hl7.org/2.0/#trusting-cds-clients
 */
export interface CdsClient {
  iss: string;
  jwks?: { keys: Record<string, unknown>[] };
  jwksUrl?: string;
  fhirServers: string[];
}

/** The time zone of a tenant that does not set one: the UAE's. */
export const DEFAULT_TIME_ZONE = 'Asia/Dubai';

/**
 * A system client registered for SMART Backend Services: its public keys (inline JWKS or a URL)
 * and the scopes it may be granted (SMART v2 or v1, `*` for any type).
 * https://hl7.org/fhir/smart-app-launch/client-confidential-asymmetric.html
 */
export interface SmartClient {
  clientId: string;
  jwks?: { keys: Record<string, unknown>[] };
  jwksUrl?: string;
  scopes: string[];
}

/** The reuse window of a tenant that does not set one (docs/batch-and-reuse.md). */
export const DEFAULT_REUSE_WINDOW_MINUTES = 240;

/** BACKGROUND_DEADLINE_MINUTES when unset (docs/queue.md). */
export const DEFAULT_BACKGROUND_DEADLINE_MINUTES = 60;

/** The pre-visit re-check's lead when neither PREVISIT_LEAD_MINUTES nor the tenant sets one. */
export const DEFAULT_PREVISIT_LEAD_MINUTES = 120;
/** A lead longer than the farthest appointment (366 days) would only mean "re-check at once". */
const MAX_LEAD_MINUTES = 366 * 24 * 60;

/** An IANA time zone name that this Node's Intl knows. */
export function isTimeZone(value: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: value });
    return true;
  } catch {
    return false;
  }
}

export interface Config {
  port: number;
  host: string;
  /** Absolute base for Location, Content-Location, fullUrl; null = http://localhost:<listening port>. */
  publicBaseUrl: string | null;
  /** Upstream base ending in /v2/api-integration-v3; null = built-in sandbox. */
  upstreamBaseUrl: string | null;
  databaseUrl: string;
  tenants: Tenant[];
  sandbox: boolean;
  pollIntervalMs: number;
  /** POLL_STRATEGY: `adaptive` (phase and payer history, docs/polling.md) or `fixed` (every pollIntervalMs). */
  pollStrategy: 'adaptive' | 'fixed';
  /** MIN_POLL_GAP_MS: no two polls of one task closer than this (adaptive only). */
  minPollGapMs: number;
  submitWaitMs: number;
  checkTimeoutMs: number;
  searchAllTimeoutMs: number;
  sourceFhirBaseUrl: string | null;
  logLevel: string;
  /** When set, GET /metrics needs Authorization: Bearer <token>. */
  metricsToken: string | null;
  /** Stored checks older than this are purged. */
  retentionDays: number;
  /**
   * A final CER and its kept documents stay this long, whatever retentionDays removes of the rest
   * of the check (docs/evidence.md). Absent: 730.
   */
  evidenceRetentionDays?: number;
  /** The largest document kept (bytes, enforced while it streams). Absent: 10 MiB. */
  evidenceMaxBytes?: number;
  /** The first back-off of a failed document download (doubles at each try). Absent: 30 s. */
  evidenceRetryMs?: number;
  /** How long a replica owns a claimed check before another may take it over. */
  leaseMs: number;
  /** Per-tenant $submit budget per minute (429 + Retry-After beyond it). */
  submitRatePerMinute: number;
  /** Speed of the built-in sandbox (1 = realistic short timings; smaller = faster). */
  sandboxTimeScale: number;
  /** Browser origins allowed to call the API (CORS); empty = CORS off. */
  corsOrigins: string[];
  /** How long a failing subscription endpoint is retried before the subscription turns `error`. */
  subscriptionRetryMinutes?: number;
  /** Lifetime of a SMART access token (seconds). */
  accessTokenTtlSeconds: number;
  /**
   * Private JWKs that sign access tokens: the first signs, every one verifies (rotation:
   * docs/auth.md). Empty = an ephemeral key made at start-up (sandbox mode only).
   */
  tokenSigningKeys: Record<string, unknown>[];
  /** AuditEvents are recorded (AUDIT_EVENTS=off only for measurements). */
  auditEvents: boolean;
  /** PREVISIT_LEAD_MINUTES: the re-check before an appointment, minutes before its start (docs/previsit.md). */
  previsitLeadMinutes: number;
  /**
   * BACKGROUND_DEADLINE_MINUTES: a background check that is no appointment's (a batch entry, a
   * deferred request) is ordered among background work as if due this long after arrival
   * (docs/queue.md).
   */
  backgroundDeadlineMinutes?: number;
  /** SESSION_IDLE_MINUTES: a page session unused this long ends (docs/signin.md). */
  sessionIdleMinutes: number;
  /** SESSION_MAX_HOURS: a page session ends this long after sign-in, used or not. */
  sessionMaxHours: number;
}

const SANDBOX_KEY = 'sandbox';

/** SHA-256 hex of an API key, as stored in the tenants file (`sha256:<hex>`). */
export function hashApiKey(key: string): string {
  return apiKeyDigest(key).toString('hex');
}

/** An API key's SHA-256 digest (one call: node's one-shot hash, cheaper than a Hash object per request). */
export function apiKeyDigest(key: string): Buffer {
  return hash('sha256', key, 'buffer');
}

const intFrom = (min: number) =>
  z.string().regex(/^\d+$/, 'must be a whole number').transform(Number).pipe(z.number().int().min(min));

const httpUrl = z
  .string()
  .url('must be an absolute URL')
  .refine((v) => /^https?:\/\//.test(v), 'must be http(s)')
  .transform((v) => v.replace(/\/+$/, ''));

const positiveNumber = (message: string) =>
  z
    .string()
    .regex(/^\d+(\.\d+)?$/, `must be ${message}`)
    .transform(Number)
    .pipe(z.number().positive(`must be ${message}`));

const envSchema = z.object({
  PORT: intFrom(0).pipe(z.number().max(65535)).default(8080),
  HOST: z.string().min(1).default('0.0.0.0'),
  PUBLIC_BASE_URL: httpUrl.optional(),
  UPSTREAM_BASE_URL: httpUrl
    .refine((v) => v.endsWith('/v2/api-integration-v3'), 'must end in /v2/api-integration-v3')
    .optional(),
  DATABASE_URL: z
    .string()
    .regex(/^(sqlite:|postgres:\/\/|postgresql:\/\/)/, 'must be sqlite:<path> or postgres://...')
    .default('sqlite:data/adapter.db'),
  TENANTS_FILE: z.string().min(1).optional(),
  POLL_INTERVAL_MS: intFrom(10).default(5000),
  POLL_STRATEGY: z.enum(['adaptive', 'fixed']).default('adaptive'),
  MIN_POLL_GAP_MS: intFrom(0).default(1000),
  SUBMIT_WAIT_MS: intFrom(0).default(20000),
  CHECK_TIMEOUT_MS: intFrom(1000).default(300000),
  SEARCH_ALL_TIMEOUT_MS: intFrom(1000).default(600000),
  SOURCE_FHIR_BASE_URL: httpUrl.optional(),
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  RETENTION_DAYS: intFrom(1).default(30),
  EVIDENCE_RETENTION_DAYS: intFrom(1).default(730),
  EVIDENCE_MAX_BYTES: intFrom(1024).default(10 * 1024 * 1024),
  LEASE_MS: intFrom(1000).default(60000),
  SUBMIT_RATE_PER_MINUTE: intFrom(1).default(120),
  SANDBOX_TIME_SCALE: z
    .string()
    .regex(/^\d+(\.\d+)?$/, 'must be a positive number')
    .transform(Number)
    .pipe(z.number().positive())
    .default(1),
  ACCESS_TOKEN_TTL_SECONDS: intFrom(30).pipe(z.number().max(3600)).default(300),
  ACCESS_TOKEN_KEYS_FILE: z.string().min(1).optional(),
  AUDIT_EVENTS: z.enum(['on', 'off']).default('on'),
  LOG_LEVEL: z.enum(['error', 'warn', 'info', 'http', 'verbose', 'debug', 'silly']).default('info'),
  /** Comma-separated origins (`https://ehr.example.org`), each exactly scheme, host and port. */
  CORS_ORIGINS: z
    .string()
    .transform((value) =>
      value
        .split(',')
        .map((origin) => origin.trim())
        .filter(Boolean),
    )
    .pipe(z.array(z.string().refine(isOrigin, 'each origin must be scheme://host[:port], nothing else')))
    .default([]),
  SUBSCRIPTION_RETRY_MINUTES: intFrom(1).default(60),
  PREVISIT_LEAD_MINUTES: z
    .string()
    .regex(/^\d+(\.\d+)?$/, 'must be a number of minutes >= 0 (decimals allowed)')
    .transform(Number)
    .pipe(z.number().min(0).max(MAX_LEAD_MINUTES))
    .default(DEFAULT_PREVISIT_LEAD_MINUTES),
  SESSION_IDLE_MINUTES: positiveNumber('a number of minutes > 0 (decimals allowed)').default(15),
  BACKGROUND_DEADLINE_MINUTES: positiveNumber('a number of minutes > 0 (decimals allowed)').default(
    DEFAULT_BACKGROUND_DEADLINE_MINUTES,
  ),
  SESSION_MAX_HOURS: positiveNumber('a number of hours > 0 (decimals allowed)').default(12),
  /** Comma-separated subscriptionEndpoints of the sandbox tenant (sandbox mode only). */
  SANDBOX_SUBSCRIPTION_ENDPOINTS: z.string().optional(),
});

/** An origin as a browser sends it: http(s), a host, maybe a port; no path, query or credentials. */
function isOrigin(value: string): boolean {
  try {
    const url = new URL(value);
    return (url.protocol === 'https:' || url.protocol === 'http:') && url.origin === value;
  } catch {
    return false;
  }
}

/**
 * A value written `env:NAME` is read from that environment variable (docs/operations.md: any value of the
 * tenants file; in practice the upstream key, and the clinic's ids where they are kept out of it).
 */
const secretRef = (env: NodeJS.ProcessEnv) =>
  z.string().transform((value, ctx) => {
    if (!value.startsWith('env:')) return value;
    const name = value.slice(4);
    const resolved = env[name];
    if (!resolved) {
      ctx.addIssue({ code: 'custom', message: `environment variable ${name} is not set` });
      return z.NEVER;
    }
    return resolved;
  });

/**
 * A prefix of subscription endpoints: an absolute http(s) URL without credentials, query or
 * fragment. Compared by origin and then path (notifications/endpoints.ts), so
 * `https://ehr.example.org` does not admit `https://ehr.example.org.evil.test`.
 */
const subscriptionEndpoint = z
  .string()
  .url('must be an absolute URL')
  .refine(
    isUrlPrefix,
    'subscriptionEndpoints entries must be http(s) URLs without credentials, query or fragment',
  );

/**
 * A URL prefix of a tenant's (subscriptionEndpoints, a CDS client's fhirServers): http(s), no
 * credentials, query or fragment. Runs even when .url() failed (zod reports every issue): a value
 * that does not parse is refused here too.
 */
function isUrlPrefix(value: string): boolean {
  try {
    const url = new URL(value);
    return /^https?:$/.test(url.protocol) && !url.username && !url.password && !url.search && !url.hash;
  } catch {
    return false;
  }
}

/**
 * Where a client's JWKS may be fetched from: https, or http to a loopback address (a key server
 * on the same host). https://hl7.org/fhir/smart-app-launch/client-confidential-asymmetric.html
 * asks for TLS on the JWKS URL.
 */
export function isAllowedJwksUrl(value: string): boolean {
  try {
    const url = new URL(value);
    if (url.username || url.password) return false;
    if (url.protocol === 'https:') return true;
    return url.protocol === 'http:' && ['localhost', '127.0.0.1', '[::1]'].includes(url.hostname);
  } catch {
    return false;
  }
}

/** A SMART scope as a client may be registered with (v2 `.cruds` or v1 `.read`/`.write`/`.*`). */
export const SMART_SCOPE = /^system\/(\*|[A-Z][A-Za-z]{1,63})\.(c?r?u?d?s?|read|write|\*)$/;

const jwkSchema = z.object({ kty: z.string().min(1) }).passthrough();

const smartClientSchema = z
  .object({
    clientId: z.string().regex(/^[A-Za-z0-9._:-]{1,128}$/, 'clientId: 1-128 of A-Z a-z 0-9 . _ : -'),
    jwks: z.object({ keys: z.array(jwkSchema).min(1) }).optional(),
    jwksUrl: z
      .string()
      .refine(isAllowedJwksUrl, 'jwksUrl must be https, or http to a loopback address')
      .optional(),
    scopes: z
      .array(z.string().refine((v) => SMART_SCOPE.test(v) && !v.endsWith('.'), 'not a system/ SMART scope'))
      .min(1),
  })
  .refine(
    (c) => (c.jwks === undefined) !== (c.jwksUrl === undefined),
    'give exactly one of jwks and jwksUrl',
  );

/**
 * A registered `fhirServers` prefix: an absolute http(s) URL without credentials, query or
 * fragment; compared on the parsed URL by whole path segments (operations/cds-hooks/fhir-server.ts).
 */
const fhirServerPrefix = z
  .string()
  .refine(isUrlPrefix, 'fhirServers entries must be http(s) URLs without credentials, query or fragment');

const cdsClientSchema = z
  .object({
    iss: z.string().min(1).max(512),
    jwks: z.object({ keys: z.array(jwkSchema).min(1) }).optional(),
    jwksUrl: z
      .string()
      .refine(isAllowedJwksUrl, 'jwksUrl must be https, or http to a loopback address')
      .optional(),
    fhirServers: z.array(fhirServerPrefix).max(50).default([]),
  })
  .refine(
    (c) => (c.jwks === undefined) !== (c.jwksUrl === undefined),
    'give exactly one of jwks and jwksUrl',
  );

/**
 * An EHR FHIR base a SMART launch may name as `iss`: https, or http to a loopback address (an EHR
 * on the same host); no credentials, query or fragment; kept without a trailing slash.
 */
const ehrFhirBase = z
  .string()
  .refine(
    (v) => isAllowedJwksUrl(v) && isUrlPrefix(v),
    'fhirBaseUrls entries must be https (or http to a loopback address) without credentials, query or fragment',
  )
  .transform((v) => v.replace(/\/+$/, ''));

/** A private key of a confidential SMART app: the SMART asymmetric profile's RS384 or ES384. */
const smartLaunchKey = jwkSchema.extend({
  kid: z.string().min(1),
  alg: z.enum(['RS384', 'ES384']),
  d: z.string().min(1, 'clientKeys must be private keys'),
});

/** The search parameters the adapter sets itself: `search` may not change them. */
const OWN_SEARCH_PARAMETERS = new Set(['date', '_count', '_include', '_sort', '_elements', '_summary']);

const ehrScheduleSchema = z.object({
  fhirBaseUrl: ehrFhirBase,
  clientId: z.string().min(1).max(256),
  clientKeys: z.object({ keys: z.array(smartLaunchKey).min(1) }),
  scope: z
    .string()
    .max(1000)
    .refine((v) => v.split(' ').every((s) => /^[\x21-\x7e]+$/.test(s)), 'scope: space-separated scopes')
    .default(DEFAULT_EHR_SCHEDULE_SCOPE),
  everyMinutes: z.number().min(0.05).max(1440).default(15),
  daysAhead: z.number().int().min(1).max(31).default(2),
  search: z
    .string()
    .max(1000)
    .refine((v) => {
      const names = [...new URLSearchParams(v).keys()];
      return names.every((n) => n.length > 0 && !OWN_SEARCH_PARAMETERS.has(n));
    }, 'search: name=value pairs joined by &, not date, _count or _include (the adapter sets those)')
    .default(''),
});

const smartLaunchSchema = z.object({
  fhirBaseUrls: z.array(ehrFhirBase).min(1).max(20),
  clientId: z.string().min(1).max(256),
  clientKeys: z.object({ keys: z.array(smartLaunchKey).min(1) }).optional(),
});

/**
 * Where provider metadata may be read from: https, or http to a loopback address (a provider on
 * the same host, as in tests). The same rule as a JWKS URL.
 */
export const isAllowedIssuer = isAllowedJwksUrl;

const oidcSchema = (env: NodeJS.ProcessEnv) =>
  z
    .object({
      issuer: z
        .string()
        .refine(isAllowedIssuer, 'oidc.issuer must be an https URL, or http to a loopback address'),
      clientId: secretRef(env).pipe(z.string().min(1).max(256)),
      clientSecret: secretRef(env).pipe(z.string().min(1)).optional(),
      clientKeys: z.object({ keys: z.array(jwkSchema.extend({ d: z.string().min(1) })).min(1) }).optional(),
      rolesClaim: z.string().min(1).max(128).default('roles'),
      operatorRoles: z.array(z.string().min(1).max(128)).max(50).default([]),
    })
    .refine(
      (o) => (o.clientSecret === undefined) !== (o.clientKeys === undefined),
      'oidc: give exactly one of clientSecret and clientKeys',
    );

const tenantsSchema = (env: NodeJS.ProcessEnv) =>
  z.object({
    tenants: z
      .array(
        z.object({
          id: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'tenant id: 1-64 of A-Z a-z 0-9 . _ -'),
          apiKeys: z
            .array(z.string().regex(/^sha256:[0-9a-f]{64}$/, 'apiKeys entries must be sha256:<64 hex>'))
            .min(1),
          upstream: z.object({
            apiKey: secretRef(env).pipe(z.string().min(1)),
            clinicId: secretRef(env).pipe(z.string().min(1)),
            clientId: secretRef(env).pipe(z.string().min(1)),
          }),
          practiceId: secretRef(env).pipe(z.string().min(1)),
          maxInFlight: z.number().int().min(1).max(1000).default(3),
          deskSlots: z.number('deskSlots must be a whole number >= 0').int().min(0).max(999).optional(),
          subscriptionEndpoints: z.array(subscriptionEndpoint).max(50).optional(),
          reuseWindowMinutes: z.number().int().min(0).max(10_080).default(DEFAULT_REUSE_WINDOW_MINUTES),
          smartClients: z.array(smartClientSchema).default([]),
          previsitLeadMinutes: z
            .number('previsitLeadMinutes must be a number of minutes >= 0')
            .min(0, 'previsitLeadMinutes must be a number of minutes >= 0')
            .max(MAX_LEAD_MINUTES)
            .optional(),
          previsitDayStart: z
            .string()
            .regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'previsitDayStart must be HH:MM (24 h)')
            .optional(),
          timeZone: z
            .string()
            .refine(isTimeZone, 'timeZone must be an IANA time zone such as Asia/Dubai')
            .optional(),
          cdsClients: z.array(cdsClientSchema).default([]),
          smartLaunch: smartLaunchSchema.optional(),
          oidc: oidcSchema(env).optional(),
          emiratesIdCheckDigit: z
            .enum(['refuse', 'warn'], 'emiratesIdCheckDigit must be "refuse" or "warn"')
            .default('refuse'),
          ehrSchedule: ehrScheduleSchema.optional(),
        }),
      )
      .min(1),
  });

function describe(error: z.ZodError, prefix: string): string {
  const issue = error.issues[0];
  if (!issue) return prefix;
  const path = issue.path.length ? issue.path.join('.') : prefix;
  return `${prefix === path ? path : `${prefix}: ${path}`}: ${issue.message}`;
}

function loadTenants(file: string, env: NodeJS.ProcessEnv): Tenant[] {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    // Not the parser's message: it quotes the text around the error, which may be a key.
    const reason = (error as NodeJS.ErrnoException).code ?? 'not valid JSON';
    throw new ConfigError(`TENANTS_FILE: cannot read ${file} as JSON (${reason})`);
  }
  const parsed = tenantsSchema(env).safeParse(raw);
  if (!parsed.success) throw new ConfigError(describe(parsed.error, 'TENANTS_FILE'));
  const ids = new Set<string>();
  const clientIds = new Set<string>();
  const issuers = new Set<string>();
  const ehrBases = new Set<string>();
  return parsed.data.tenants.map((t) => {
    for (const base of t.smartLaunch?.fhirBaseUrls ?? []) {
      // A launch names its tenant by iss alone: one EHR FHIR base, one tenant.
      if (ehrBases.has(base))
        throw new ConfigError(`TENANTS_FILE: smartLaunch fhirBaseUrl ${base} appears twice`);
      ehrBases.add(base);
    }
    for (const client of t.cdsClients) {
      // A CDS Hooks JWT names its client by iss alone: one iss, one tenant.
      if (issuers.has(client.iss))
        throw new ConfigError(`TENANTS_FILE: cds client iss ${client.iss} appears twice`);
      issuers.add(client.iss);
    }
    if (ids.has(t.id)) throw new ConfigError(`TENANTS_FILE: tenant id ${t.id} appears twice`);
    if (t.deskSlots !== undefined && t.deskSlots >= t.maxInFlight)
      throw new ConfigError(
        `TENANTS_FILE: tenant ${t.id}: deskSlots must be less than maxInFlight (background work keeps a slot)`,
      );
    ids.add(t.id);
    for (const client of t.smartClients) {
      // The token endpoint finds the tenant from the client id alone.
      if (clientIds.has(client.clientId)) {
        throw new ConfigError(`TENANTS_FILE: smart client id ${client.clientId} appears twice`);
      }
      clientIds.add(client.clientId);
    }
    return {
      id: t.id,
      apiKeyHashes: t.apiKeys.map((k) => k.slice('sha256:'.length)),
      upstream: t.upstream,
      practiceId: t.practiceId,
      maxInFlight: t.maxInFlight,
      ...(t.deskSlots === undefined ? {} : { deskSlots: t.deskSlots }),
      ...(t.subscriptionEndpoints ? { subscriptionEndpoints: t.subscriptionEndpoints } : {}),
      reuseWindowMinutes: t.reuseWindowMinutes,
      ...(t.timeZone ? { timeZone: t.timeZone } : {}),
      ...(t.emiratesIdCheckDigit === 'warn' ? { emiratesIdCheckDigit: 'warn' as const } : {}),
      ...(t.smartClients.length > 0
        ? {
            smartClients: t.smartClients.map((c) => ({
              clientId: c.clientId,
              ...(c.jwks ? { jwks: c.jwks } : {}),
              ...(c.jwksUrl ? { jwksUrl: c.jwksUrl } : {}),
              scopes: c.scopes,
            })),
          }
        : {}),
      ...(t.previsitLeadMinutes === undefined ? {} : { previsitLeadMinutes: t.previsitLeadMinutes }),
      ...(t.previsitDayStart === undefined ? {} : { previsitDayStart: t.previsitDayStart }),
      ...(t.timeZone === undefined ? {} : { timeZone: t.timeZone }),
      ...(t.cdsClients.length > 0
        ? {
            cdsClients: t.cdsClients.map((c) => ({
              iss: c.iss,
              ...(c.jwks ? { jwks: c.jwks } : {}),
              ...(c.jwksUrl ? { jwksUrl: c.jwksUrl } : {}),
              fhirServers: c.fhirServers,
            })),
          }
        : {}),
      ...(t.smartLaunch
        ? {
            smartLaunch: {
              fhirBaseUrls: t.smartLaunch.fhirBaseUrls,
              clientId: t.smartLaunch.clientId,
              ...(t.smartLaunch.clientKeys ? { clientKeys: t.smartLaunch.clientKeys } : {}),
            },
          }
        : {}),
      ...(t.oidc ? { oidc: oidcSettings(t.oidc) } : {}),
      ...(t.ehrSchedule
        ? {
            ehrSchedule: {
              fhirBaseUrl: t.ehrSchedule.fhirBaseUrl,
              clientId: t.ehrSchedule.clientId,
              clientKeys: t.ehrSchedule.clientKeys,
              scope: t.ehrSchedule.scope,
              everyMinutes: t.ehrSchedule.everyMinutes,
              daysAhead: t.ehrSchedule.daysAhead,
              search: [...new URLSearchParams(t.ehrSchedule.search)],
            },
          }
        : {}),
    };
  });
}

function oidcSettings(o: z.infer<ReturnType<typeof oidcSchema>>): OidcSettings {
  return {
    issuer: o.issuer.replace(/\/+$/, ''),
    clientId: o.clientId,
    ...(o.clientSecret ? { clientSecret: o.clientSecret } : {}),
    ...(o.clientKeys ? { clientKeys: o.clientKeys } : {}),
    rolesClaim: o.rolesClaim,
    operatorRoles: o.operatorRoles,
  };
}

/** The access-token signing keys: a JWKS file of private keys, each with its `kid` and `alg`. */
function loadSigningKeys(file: string): Record<string, unknown>[] {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? 'not valid JSON';
    throw new ConfigError(`ACCESS_TOKEN_KEYS_FILE: cannot read ${file} as JSON (${reason})`);
  }
  const parsed = z
    .object({
      keys: z
        .array(
          jwkSchema.extend({
            kid: z.string().min(1),
            alg: z.enum(['ES256', 'ES384', 'RS256', 'RS384']),
            d: z.string().min(1).optional(),
          }),
        )
        .min(1),
    })
    .safeParse(raw);
  if (!parsed.success) throw new ConfigError(describe(parsed.error, 'ACCESS_TOKEN_KEYS_FILE'));
  if (parsed.data.keys[0]?.d === undefined) {
    throw new ConfigError('ACCESS_TOKEN_KEYS_FILE: keys.0: the first key signs, so it must be a private key');
  }
  return parsed.data.keys;
}

/**
 * The sandbox tenant: id `sandbox`, API key `sandbox` (the README); it may subscribe to the
 * endpoints under SANDBOX_SUBSCRIPTION_ENDPOINTS (none when unset).
 */
function sandboxTenant(subscriptionEndpoints: string[]): Tenant {
  return {
    ...(subscriptionEndpoints.length > 0 ? { subscriptionEndpoints } : {}),
    id: 'sandbox',
    apiKeyHashes: [hashApiKey(SANDBOX_KEY)],
    upstream: {
      apiKey: 'sandbox-upstream-key',
      clinicId: 'SANDBOX-CLINIC',
      clientId: 'fhir-eligibility-adapter',
    },
    practiceId: 'SANDBOX-PRACTICE',
    maxInFlight: 3,
    reuseWindowMinutes: DEFAULT_REUSE_WINDOW_MINUTES,
  };
}

/** SANDBOX_SUBSCRIPTION_ENDPOINTS as a list, each entry checked as a tenants file's. */
function sandboxEndpoints(value: string | undefined): string[] {
  const entries = (value ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  const parsed = z.array(subscriptionEndpoint).max(50).safeParse(entries);
  if (!parsed.success)
    throw new ConfigError(`SANDBOX_SUBSCRIPTION_ENDPOINTS: ${parsed.error.issues[0]?.message ?? 'invalid'}`);
  return parsed.data;
}

/** Parses and checks the whole configuration. Throws ConfigError with one line naming the variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new ConfigError(`${String(issue?.path[0] ?? 'environment')}: ${issue?.message ?? 'invalid'}`);
  }
  const e = parsed.data;
  const sandbox = e.UPSTREAM_BASE_URL === undefined;
  if (!sandbox && !e.TENANTS_FILE) {
    throw new ConfigError(
      'TENANTS_FILE: required when UPSTREAM_BASE_URL is set (no sandbox tenant outside sandbox mode)',
    );
  }
  if (e.SANDBOX_SUBSCRIPTION_ENDPOINTS !== undefined && e.TENANTS_FILE)
    throw new ConfigError(
      'SANDBOX_SUBSCRIPTION_ENDPOINTS: only for the sandbox tenant; with TENANTS_FILE, set subscriptionEndpoints in it',
    );
  const tenants = e.TENANTS_FILE
    ? loadTenants(e.TENANTS_FILE, env)
    : [sandboxTenant(sandboxEndpoints(e.SANDBOX_SUBSCRIPTION_ENDPOINTS))];
  const tokenSigningKeys = e.ACCESS_TOKEN_KEYS_FILE ? loadSigningKeys(e.ACCESS_TOKEN_KEYS_FILE) : [];
  if (!sandbox && tokenSigningKeys.length === 0 && tenants.some((t) => t.smartClients?.length)) {
    throw new ConfigError(
      'ACCESS_TOKEN_KEYS_FILE: required when a tenant has smartClients outside sandbox mode (replicas must share the key)',
    );
  }
  return {
    port: e.PORT,
    host: e.HOST,
    publicBaseUrl: e.PUBLIC_BASE_URL ?? null,
    upstreamBaseUrl: e.UPSTREAM_BASE_URL ?? null,
    databaseUrl: e.DATABASE_URL,
    tenants,
    sandbox,
    pollIntervalMs: e.POLL_INTERVAL_MS,
    pollStrategy: e.POLL_STRATEGY,
    minPollGapMs: e.MIN_POLL_GAP_MS,
    submitWaitMs: e.SUBMIT_WAIT_MS,
    checkTimeoutMs: e.CHECK_TIMEOUT_MS,
    searchAllTimeoutMs: e.SEARCH_ALL_TIMEOUT_MS,
    sourceFhirBaseUrl: e.SOURCE_FHIR_BASE_URL ?? null,
    logLevel: e.LOG_LEVEL,
    metricsToken: e.METRICS_TOKEN ?? null,
    retentionDays: e.RETENTION_DAYS,
    evidenceRetentionDays: e.EVIDENCE_RETENTION_DAYS,
    evidenceMaxBytes: e.EVIDENCE_MAX_BYTES,
    leaseMs: e.LEASE_MS,
    submitRatePerMinute: e.SUBMIT_RATE_PER_MINUTE,
    sandboxTimeScale: e.SANDBOX_TIME_SCALE,
    corsOrigins: e.CORS_ORIGINS,
    subscriptionRetryMinutes: e.SUBSCRIPTION_RETRY_MINUTES,
    accessTokenTtlSeconds: e.ACCESS_TOKEN_TTL_SECONDS,
    tokenSigningKeys,
    auditEvents: e.AUDIT_EVENTS === 'on',
    previsitLeadMinutes: e.PREVISIT_LEAD_MINUTES,
    backgroundDeadlineMinutes: e.BACKGROUND_DEADLINE_MINUTES,
    sessionIdleMinutes: e.SESSION_IDLE_MINUTES,
    sessionMaxHours: e.SESSION_MAX_HOURS,
  };
}
