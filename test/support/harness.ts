/**
 * Component-test harness: the real service (express, scheduler, store) against the sandbox
 * upstream over real HTTP on local ports, with every log line captured for assertions.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import type {
  CdsClient,
  Config,
  EhrSchedule,
  OidcSettings,
  SmartClient,
  SmartLaunch,
  Tenant,
} from '../../src/config.js';
import { hashApiKey } from '../../src/config.js';
import type { UpstreamPort } from '../../src/upstream/port.js';
import { createLogger } from '../../src/log.js';
import type { RunningServer, ServerOverrides } from '../../src/server.js';
import { startServer } from '../../src/server.js';
import { startSandbox } from '../../src/sandbox/index.js';
import { warmFhirDefinitions } from '../../src/fhir/validator.js';

export const UPSTREAM_KEY = 'upstream-secret-key-for-tests-9f3a';
export const TENANT_A_KEY = 'tenant-a-inbound-key-4b1d8e';
export const TENANT_B_KEY = 'tenant-b-inbound-key-7c2f0a';

export function tenant(id: string, inboundKey: string, maxInFlight = 3, reuseWindowMinutes = 0): Tenant {
  return {
    id,
    apiKeyHashes: [hashApiKey(inboundKey)],
    upstream: { apiKey: UPSTREAM_KEY, clinicId: `clinic-${id}`, clientId: 'EHR-1' },
    practiceId: `P-${id}`,
    maxInFlight,
    reuseWindowMinutes,
  };
}

export interface HarnessOptions {
  timeScale?: number;
  pollIntervalMs?: number;
  /** POLL_STRATEGY; default `fixed` here, so the other tests' timings stay as they were. */
  pollStrategy?: 'adaptive' | 'fixed';
  /** MIN_POLL_GAP_MS; default 1000. */
  minPollGapMs?: number;
  /** Seed of the sandbox's spread of task durations per payer (none: its fixed timelines). */
  durationSeed?: number;
  submitWaitMs?: number;
  checkTimeoutMs?: number;
  searchAllTimeoutMs?: number;
  maxInFlight?: number;
  /**
   * The tenants' reuse window (docs/batch-and-reuse.md). 0 (off) unless given: the other
   * component tests send the same patient many times and mean a new check each time.
   */
  reuseWindowMinutes?: number;
  databaseUrl?: string;
  faults?: { pollErrorRate?: number; latencyMs?: number };
  overrides?: ServerOverrides;
  /** CORS_ORIGINS. */
  corsOrigins?: string[];
  /** SOURCE_FHIR_BASE_URL: the EHR's FHIR server for literal references (none by default). */
  sourceFhirBaseUrl?: string | null;
  /** Both tenants' subscriptionEndpoints (URL prefixes a Subscription may notify). */
  subscriptionEndpoints?: string[];
  /** SMART clients of clinic-a and clinic-b (docs/auth.md). */
  smartClients?: { a?: SmartClient[]; b?: SmartClient[] };
  /** CDS Hooks clients of clinic-a and clinic-b (docs/cds-hooks.md). */
  cdsClients?: { a?: CdsClient[]; b?: CdsClient[] };
  accessTokenTtlSeconds?: number;
  /** ACCESS_TOKEN_KEYS_FILE's keys (default: an ephemeral key). */
  tokenSigningKeys?: Record<string, unknown>[];
  auditEvents?: boolean;
  /** PUBLIC_BASE_URL (default: http://localhost:<port>). */
  publicBaseUrl?: string;
  /** PREVISIT_LEAD_MINUTES (default 120). */
  previsitLeadMinutes?: number;
  /** OpenID Connect sign-in of clinic-a and clinic-b (docs/signin.md). */
  oidc?: { a?: OidcSettings; b?: OidcSettings };
  /** SMART App Launch of the page from clinic-a's EHR (docs/smart-launch.md). */
  smartLaunch?: { a?: SmartLaunch; b?: SmartLaunch };
  /** SESSION_IDLE_MINUTES, SESSION_MAX_HOURS (defaults 15, 12). */
  sessionIdleMinutes?: number;
  sessionMaxHours?: number;
  /** LEASE_MS (default 60 s). */
  leaseMs?: number;
  /** EVIDENCE_MAX_BYTES (default 10 MiB). */
  evidenceMaxBytes?: number;
  /** The first back-off of a failed document download (default here 50 ms). */
  evidenceRetryMs?: number;
  /** Tenants that let a wrong Emirates ID check digit through with a warning. */
  emiratesIdCheckDigit?: { a?: 'warn'; b?: 'warn' };
  /** clinic-a's schedule read from an EHR (docs/ehr-schedule.md). */
  ehrSchedule?: { a?: EhrSchedule };
}

export interface Harness {
  url: string;
  server: RunningServer;
  sandbox: Awaited<ReturnType<typeof startSandbox>>;
  /** Every log line the service wrote (level debug and up), raw JSON text. */
  logs: string[];
  auth: { Authorization: string };
  authB: { Authorization: string };
  stop(): Promise<void>;
}

/** A logger that writes into an array of raw JSON lines. */
export function captureLogger(): { logger: ReturnType<typeof createLogger>; logs: string[] } {
  const stream = new PassThrough();
  const logs: string[] = [];
  stream.on('data', (chunk: Buffer) => logs.push(...chunk.toString('utf8').split('\n').filter(Boolean)));
  return { logger: createLogger('debug', stream), logs };
}

/** The service configuration the component tests use, against a given upstream URL. */
export function testConfig(upstreamUrl: string, options: HarnessOptions = {}): Config {
  const dir = mkdtempSync(join(tmpdir(), 'fea-'));
  return {
    port: 0,
    host: '127.0.0.1',
    publicBaseUrl: options.publicBaseUrl ?? null,
    upstreamBaseUrl: upstreamUrl,
    databaseUrl: options.databaseUrl ?? `sqlite:${join(dir, 'adapter.db')}`,
    tenants: [
      {
        ...tenant('clinic-a', TENANT_A_KEY, options.maxInFlight ?? 3, options.reuseWindowMinutes ?? 0),
        smartClients: options.smartClients?.a ?? [],
        ...(options.cdsClients?.a ? { cdsClients: options.cdsClients.a } : {}),
        ...(options.oidc?.a ? { oidc: options.oidc.a } : {}),
        ...(options.smartLaunch?.a ? { smartLaunch: options.smartLaunch.a } : {}),
        ...(options.emiratesIdCheckDigit?.a ? { emiratesIdCheckDigit: options.emiratesIdCheckDigit.a } : {}),
        ...(options.ehrSchedule?.a ? { ehrSchedule: options.ehrSchedule.a } : {}),
      },
      {
        ...tenant('clinic-b', TENANT_B_KEY, options.maxInFlight ?? 3, options.reuseWindowMinutes ?? 0),
        smartClients: options.smartClients?.b ?? [],
        ...(options.cdsClients?.b ? { cdsClients: options.cdsClients.b } : {}),
        ...(options.oidc?.b ? { oidc: options.oidc.b } : {}),
        ...(options.smartLaunch?.b ? { smartLaunch: options.smartLaunch.b } : {}),
        ...(options.emiratesIdCheckDigit?.b ? { emiratesIdCheckDigit: options.emiratesIdCheckDigit.b } : {}),
      },
    ].map((t) =>
      options.subscriptionEndpoints ? { ...t, subscriptionEndpoints: options.subscriptionEndpoints } : t,
    ),
    sandbox: false,
    pollIntervalMs: options.pollIntervalMs ?? 50,
    pollStrategy: options.pollStrategy ?? 'fixed',
    minPollGapMs: options.minPollGapMs ?? 1000,
    submitWaitMs: options.submitWaitMs ?? 5000,
    checkTimeoutMs: options.checkTimeoutMs ?? 20_000,
    searchAllTimeoutMs: options.searchAllTimeoutMs ?? 30_000,
    sourceFhirBaseUrl: options.sourceFhirBaseUrl ?? null,
    logLevel: 'debug',
    metricsToken: null,
    retentionDays: 30,
    leaseMs: options.leaseMs ?? 60_000,
    submitRatePerMinute: 10_000,
    sandboxTimeScale: 1,
    corsOrigins: options.corsOrigins ?? [],
    accessTokenTtlSeconds: options.accessTokenTtlSeconds ?? 300,
    tokenSigningKeys: options.tokenSigningKeys ?? [],
    auditEvents: options.auditEvents ?? true,
    previsitLeadMinutes: options.previsitLeadMinutes ?? 120,
    sessionIdleMinutes: options.sessionIdleMinutes ?? 15,
    sessionMaxHours: options.sessionMaxHours ?? 12,
    ...(options.evidenceMaxBytes !== undefined ? { evidenceMaxBytes: options.evidenceMaxBytes } : {}),
    evidenceRetryMs: options.evidenceRetryMs ?? 50,
  };
}

/** Starts sandbox + service. Call stop() in afterAll. */
export async function startHarness(options: HarnessOptions = {}): Promise<Harness> {
  const sandbox = await startSandbox({
    port: 0,
    timeScale: options.timeScale ?? 0.02,
    apiKeys: [UPSTREAM_KEY],
    ...(options.durationSeed !== undefined ? { durationSeed: options.durationSeed } : {}),
  });
  if (options.faults) sandbox.control.setFaults(options.faults);
  const { logger, logs } = captureLogger();
  const server = await startServer(testConfig(sandbox.url, options), logger, options.overrides);
  // As a deployment waits for /ready: the FHIR definitions loaded (same process, same module).
  await warmFhirDefinitions();
  return {
    url: server.url,
    server,
    sandbox,
    logs,
    auth: { Authorization: `Bearer ${TENANT_A_KEY}` },
    authB: { Authorization: `Bearer ${TENANT_B_KEY}` },
    async stop() {
      await server.stop();
      // A test may have closed the sandbox already (upstream-down cases).
      await sandbox.close().catch(() => undefined);
    },
  };
}

/** Wraps an upstream port and counts calls, so a test can prove no duplicate task was created. */
export function countingUpstream(counts: {
  create: number;
  poll: number;
}): (inner: UpstreamPort) => UpstreamPort {
  return (inner) => ({
    createTask: (creds, body) => {
      counts.create += 1;
      return inner.createTask(creds, body);
    },
    getResult: (creds, id) => {
      counts.poll += 1;
      return inner.getResult(creds, id);
    },
    health: () => inner.health(),
  });
}

const TERMINAL = new Set(['PROCESS_COMPLETE', 'CANCELLED', 'FAILED']);

/**
 * Samples the sandbox every 20 ms and keeps, per clinic, the largest number of its tasks seen in
 * flight at once (the upstream's view of maxInFlight).
 */
export function trackInFlight(sandbox: Awaited<ReturnType<typeof startSandbox>>): {
  maxByClinic: Map<string, number>;
  stop(): void;
} {
  const maxByClinic = new Map<string, number>();
  const timer = setInterval(() => {
    const running = new Map<string, number>();
    for (const task of sandbox.control.tasks()) {
      if (!TERMINAL.has(task.status)) running.set(task.clinicId, (running.get(task.clinicId) ?? 0) + 1);
    }
    for (const [clinic, count] of running)
      maxByClinic.set(clinic, Math.max(maxByClinic.get(clinic) ?? 0, count));
  }, 20);
  return { maxByClinic, stop: () => clearInterval(timer) };
}
