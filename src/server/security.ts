/**
 * Who may call: SMART Backend Services tokens and the audit trail (docs/auth.md), and the CDS
 * Hooks service with its EHR JWTs and guarded prefetch client (docs/cds-hooks.md).
 */
import type { Express } from 'express';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import { AuditTrail } from '../checks/audit.js';
import type { CheckService } from '../checks/service.js';
import type { Store } from '../checks/store/appointment-store.js';
import { cdsRoutes } from '../http/cds-routes.js';
import { RefusalCounter, tokenRoute } from '../http/security.js';
import { AccessTokens } from '../operations/auth/access-tokens.js';
import { ClientKeys } from '../operations/auth/token-endpoint.js';
import { GuardedFhirClient } from '../operations/cds-hooks/fhir-server.js';

export interface Security {
  tokens: AccessTokens;
  audit: AuditTrail;
  /** Counts refused calls and logs them in summary (src/http/security.ts). */
  refused: RefusalCounter['note'];
  /** The token endpoint and the CDS Hooks routes. */
  routes(app: Express): void;
  stop(): Promise<void>;
}

export interface SecurityContext {
  config: Config;
  logger: Logger;
  store: Store;
  checks: CheckService;
  metrics: Metrics;
  baseUrl: string;
  now: () => number;
}

export async function buildSecurity(context: SecurityContext): Promise<Security> {
  const { config, logger, store, checks, metrics, baseUrl, now } = context;
  const { tokens, ephemeral } = await AccessTokens.create({
    keys: config.tokenSigningKeys,
    issuer: baseUrl,
    audience: `${baseUrl}/fhir`,
    ttlSeconds: config.accessTokenTtlSeconds,
    tenants: config.tenants,
  });
  if (ephemeral && config.tenants.some((t) => t.smartClients?.length)) {
    logger.warn(
      'ACCESS_TOKEN_KEYS_FILE is not set: access tokens are signed with an ephemeral key made at start-up',
    );
  }
  const audit = new AuditTrail(
    store,
    { enabled: config.auditEvents, flushMs: 1000, batchSize: 1000, maxQueued: 50_000, now },
    logger,
  );
  const refusals = new RefusalCounter(logger);
  const keys = new ClientKeys();
  const rememberJti = store.rememberJti.bind(store);
  const tokenRoutes = tokenRoute(
    { tenants: config.tenants, tokens, keys, tokenUrl: `${baseUrl}/auth/token`, rememberJti, now },
    { audit, refused: refusals.note },
  );
  // CDS Hooks (docs/cds-hooks.md): the EHR's FHIR server is read through one guarded client.
  const ehrFhir = new GuardedFhirClient();
  const cds = cdsRoutes({
    baseUrl,
    jwt: { tenants: config.tenants, keys, rememberJti, now },
    hooks: { checks, fhir: ehrFhir, baseUrl, now },
    audit,
    metrics: metrics.cds,
    refused: refusals.note,
  });
  return {
    tokens,
    audit,
    refused: refusals.note,
    routes(app) {
      tokenRoutes(app);
      cds(app);
    },
    async stop() {
      refusals.stop();
      await audit.stop();
      await ehrFhir.close();
    },
  };
}
