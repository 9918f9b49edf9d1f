/**
 * Configuration: environment variables and the tenants file, exactly as named in the README
 * section 2, parsed with zod before the service listens. A wrong value stops the process with
 * one line naming the variable (ConfigError), never a stack trace.
 */
import { createHash } from 'node:crypto';
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
   * URL prefixes a Subscription's channel.endpoint must start with (docs/notifications.md); absent
   * or empty: the tenant cannot subscribe (no request goes to an address it did not register).
   */
  subscriptionEndpoints?: string[];
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
  submitWaitMs: number;
  checkTimeoutMs: number;
  searchAllTimeoutMs: number;
  sourceFhirBaseUrl: string | null;
  logLevel: string;
  /** When set, GET /metrics needs Authorization: Bearer <token>. */
  metricsToken: string | null;
  /** Stored checks older than this are purged. */
  retentionDays: number;
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
}

const SANDBOX_KEY = 'sandbox';

/** SHA-256 hex of an API key, as stored in the tenants file (`sha256:<hex>`). */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

const intFrom = (min: number) =>
  z.string().regex(/^\d+$/, 'must be a whole number').transform(Number).pipe(z.number().int().min(min));

const httpUrl = z
  .string()
  .url('must be an absolute URL')
  .refine((v) => /^https?:\/\//.test(v), 'must be http(s)')
  .transform((v) => v.replace(/\/+$/, ''));

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
  SUBMIT_WAIT_MS: intFrom(0).default(20000),
  CHECK_TIMEOUT_MS: intFrom(1000).default(300000),
  SEARCH_ALL_TIMEOUT_MS: intFrom(1000).default(600000),
  SOURCE_FHIR_BASE_URL: httpUrl.optional(),
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  RETENTION_DAYS: intFrom(1).default(30),
  LEASE_MS: intFrom(1000).default(60000),
  SUBMIT_RATE_PER_MINUTE: intFrom(1).default(120),
  SANDBOX_TIME_SCALE: z
    .string()
    .regex(/^\d+(\.\d+)?$/, 'must be a positive number')
    .transform(Number)
    .pipe(z.number().positive())
    .default(1),
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
  .refine((value) => {
    // Runs even when .url() failed (zod reports every issue): a value that does not parse is refused here too.
    try {
      const url = new URL(value);
      return /^https?:$/.test(url.protocol) && !url.username && !url.password && !url.search && !url.hash;
    } catch {
      return false;
    }
  }, 'subscriptionEndpoints entries must be http(s) URLs without credentials, query or fragment');

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
          subscriptionEndpoints: z.array(subscriptionEndpoint).max(50).optional(),
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
  return parsed.data.tenants.map((t) => {
    if (ids.has(t.id)) throw new ConfigError(`TENANTS_FILE: tenant id ${t.id} appears twice`);
    ids.add(t.id);
    return {
      id: t.id,
      apiKeyHashes: t.apiKeys.map((k) => k.slice('sha256:'.length)),
      upstream: t.upstream,
      practiceId: t.practiceId,
      maxInFlight: t.maxInFlight,
      ...(t.subscriptionEndpoints ? { subscriptionEndpoints: t.subscriptionEndpoints } : {}),
    };
  });
}

/** The sandbox tenant: id `sandbox`, API key `sandbox` (the README). */
function sandboxTenant(): Tenant {
  return {
    id: 'sandbox',
    apiKeyHashes: [hashApiKey(SANDBOX_KEY)],
    upstream: {
      apiKey: 'sandbox-upstream-key',
      clinicId: 'SANDBOX-CLINIC',
      clientId: 'fhir-eligibility-adapter',
    },
    practiceId: 'SANDBOX-PRACTICE',
    maxInFlight: 3,
  };
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
  const tenants = e.TENANTS_FILE ? loadTenants(e.TENANTS_FILE, env) : [sandboxTenant()];
  return {
    port: e.PORT,
    host: e.HOST,
    publicBaseUrl: e.PUBLIC_BASE_URL ?? null,
    upstreamBaseUrl: e.UPSTREAM_BASE_URL ?? null,
    databaseUrl: e.DATABASE_URL,
    tenants,
    sandbox,
    pollIntervalMs: e.POLL_INTERVAL_MS,
    submitWaitMs: e.SUBMIT_WAIT_MS,
    checkTimeoutMs: e.CHECK_TIMEOUT_MS,
    searchAllTimeoutMs: e.SEARCH_ALL_TIMEOUT_MS,
    sourceFhirBaseUrl: e.SOURCE_FHIR_BASE_URL ?? null,
    logLevel: e.LOG_LEVEL,
    metricsToken: e.METRICS_TOKEN ?? null,
    retentionDays: e.RETENTION_DAYS,
    leaseMs: e.LEASE_MS,
    submitRatePerMinute: e.SUBMIT_RATE_PER_MINUTE,
    sandboxTimeScale: e.SANDBOX_TIME_SCALE,
    corsOrigins: e.CORS_ORIGINS,
    subscriptionRetryMinutes: e.SUBSCRIPTION_RETRY_MINUTES,
  };
}
