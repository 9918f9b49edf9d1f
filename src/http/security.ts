/**
 * SMART Backend Services on the HTTP side (docs/auth.md): the token endpoint, the
 * smart-configuration document, per-route scope checks and the audit trail of each FHIR
 * interaction, written after the answer is sent.
 */
import express from 'express';
import type { ErrorRequestHandler, RequestHandler, Response } from 'express';
import type { AuditTrail } from '../checks/audit.js';
import type { AuditAction, AuditOperation, AuditRecord } from '../fhir/audit-event.js';
import { OperationOutcomeError, outcome } from '../fhir/outcomes.js';
import type { Logger } from '../log.js';
import { ASSERTION_ALGORITHMS, issueToken, OAuthError } from '../operations/auth/token-endpoint.js';
import type { TokenDeps } from '../operations/auth/token-endpoint.js';
import type { Permission } from '../operations/auth/scopes.js';
import { permits } from '../operations/auth/scopes.js';
import type { Principal } from './middleware.js';

/** The scopes this service can grant, as smart-configuration lists them. */
export const SUPPORTED_SCOPES = [
  'system/CoverageEligibilityRequest.crus',
  'system/CoverageEligibilityResponse.rs',
  'system/AuditEvent.rs',
  'system/DocumentReference.rs',
  'system/Subscription.cruds',
  'system/*.read',
  'system/*.write',
];

/**
 * GET /fhir/.well-known/smart-configuration, public
 * (https://hl7.org/fhir/smart-app-launch/conformance.html#using-well-known): what a backend
 * client needs, the token endpoint and its asymmetric client authentication.
 */
export function smartConfiguration(baseUrl: string): Record<string, unknown> {
  return {
    issuer: baseUrl,
    token_endpoint: `${baseUrl}/auth/token`,
    token_endpoint_auth_methods_supported: ['private_key_jwt'],
    token_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGORITHMS,
    grant_types_supported: ['client_credentials'],
    scopes_supported: SUPPORTED_SCOPES,
    capabilities: ['client-confidential-asymmetric', 'permission-v1', 'permission-v2'],
    response_types_supported: ['token'],
  };
}

/**
 * A route needs these permissions on a resource type: `requireScope('CoverageEligibilityRequest',
 * 'c')`. An API key has them all; a SMART client needs a granted scope for each letter, else 403
 * with an OperationOutcome (the audit trail records the refusal when the route is `audited`).
 */
export function requireScope(type: string, permissions: string): RequestHandler {
  const needed = [...permissions] as Permission[];
  return (_req, res, next) => {
    const principal = res.locals.principal as Principal | undefined;
    if (!principal || principal.scopes === null || permits(principal.scopes, type, needed)) {
      next();
      return;
    }
    res.locals.auditNote = `missing scope system/${type}.${permissions}`;
    next(
      new OperationOutcomeError(
        outcome(
          'forbidden',
          `This needs the scope system/${type}.${permissions}, which the access token was not granted`,
        ),
        403,
      ),
    );
  };
}

export interface AuditSpec {
  action: AuditAction;
  interaction: string;
  operation?: AuditOperation;
  /**
   * The relative reference of what the request concerned, read once the answer is written. A
   * list (a batch's checks) records one AuditEvent per reference.
   */
  entity?: (req: express.Request, res: Response) => string | readonly string[] | undefined;
}

/**
 * The resource in the Location header the service set (`.../{type}/{id}`), as a relative
 * reference: also on an error answer that stored a CER (no determination).
 */
export const locationOf =
  (type: string) =>
  (_req: express.Request, res: Response): string | undefined => {
    const location = res.getHeader('location');
    if (typeof location !== 'string') return undefined;
    const match = /\/([A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})$/.exec(location);
    return match && match[1] === type ? `${type}/${match[2]}` : undefined;
  };

/** The check of a `$submit` answer (its Location). */
export const locationEntity = locationOf('CoverageEligibilityResponse');

/**
 * The checks a batch answered for (each entry's `response.location`), set by the batch route in
 * `res.locals.auditEntities` from its batch-response.
 */
export function listedEntities(_req: express.Request, res: Response): readonly string[] | undefined {
  return res.locals.auditEntities as readonly string[] | undefined;
}

/**
 * The route's own resource, `{type}/{req.params.id}`, once it was answered: on a refusal the id is
 * only the caller's text, which could be anything (a patient identifier), so it is not recorded.
 */
export const paramEntity =
  (type: string) =>
  (req: express.Request, res: Response): string | undefined =>
    res.statusCode < 400 && typeof req.params.id === 'string' ? `${type}/${req.params.id}` : undefined;

/** The AuditEvent of a CER read: the app's route and the CER read lane record the same. */
export const CER_READ_AUDIT: AuditSpec = {
  action: 'R',
  interaction: 'read',
  entity: paramEntity('CoverageEligibilityResponse'),
};

/**
 * The AuditEvents of one answered request: outcome 0 for a success, 4 for a refusal (4xx: a
 * missing scope, another tenant's id), 8 for a server error; one per entity. Used by audited and
 * the CER read lane (src/http/cer-read-lane.ts).
 */
export function auditRecords(
  spec: AuditSpec,
  principal: Principal,
  status: number,
  entity: string | readonly string[] | undefined,
  note: string | undefined,
): AuditRecord[] {
  const record: AuditRecord = {
    tenantId: principal.tenant.id,
    agentId: principal.id,
    agentKind: principal.kind,
    action: spec.action,
    interaction: spec.interaction,
    outcome: status < 400 ? '0' : status < 500 ? '4' : '8',
  };
  if (spec.operation) record.operation = spec.operation;
  const { person } = principal;
  if (person) {
    record.person = {
      issuer: person.issuer,
      subject: person.subject,
      name: person.name,
      ...(person.fhirUser ? { reference: person.fhirUser } : {}),
    };
  }
  if (status >= 400) record.outcomeDesc = note ?? `HTTP ${status}`;
  const entities = entity === undefined ? [undefined] : typeof entity === 'string' ? [entity] : entity;
  if (entities.length === 0) return [record];
  return entities.map((what) => (what ? { ...record, entities: [what] } : record));
}

/**
 * Records an AuditEvent for the request once its answer is sent (never on the answer's path), see
 * auditRecords. A request that was not authenticated has no tenant and is not recorded here.
 */
export function audited(audit: AuditTrail | undefined, spec: AuditSpec): RequestHandler {
  if (!audit?.enabled) return (_req, _res, next) => next();
  return (req, res, next) => {
    res.on('finish', () => {
      const principal = res.locals.principal as Principal | undefined;
      if (!principal) return;
      const records = auditRecords(
        spec,
        principal,
        res.statusCode,
        spec.entity?.(req, res),
        res.locals.auditNote as string | undefined,
      );
      for (const record of records) audit.record(record);
    });
    next();
  };
}

/**
 * Refused authentication has no tenant: it is counted, and the count goes to the operator's log
 * once per interval (never the credential, never the request).
 */
export class RefusalCounter {
  private counts: Record<string, number> = {};
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly logger: Logger,
    intervalMs = 60_000,
  ) {
    this.timer = setInterval(() => this.flush(), intervalMs);
    this.timer.unref();
  }

  readonly note = (reason: string): void => {
    this.counts[reason] = (this.counts[reason] ?? 0) + 1;
  };

  flush(): void {
    const total = Object.values(this.counts).reduce((a, b) => a + b, 0);
    if (total === 0) return;
    this.logger.warn('authentication refused', { count: total, byReason: this.counts });
    this.counts = {};
  }

  stop(): void {
    clearInterval(this.timer);
    this.flush();
  }
}

function sendOAuthError(res: Response, error: OAuthError): void {
  res
    .status(error.status)
    .set({ 'Cache-Control': 'no-store', Pragma: 'no-cache' })
    .json({ error: error.code, error_description: error.description });
}

/**
 * POST /auth/token (backend-services.html#obtaining-an-access-token): a form-encoded body,
 * answered with the token or an RFC 6749 section 5.2 error, never cached.
 */
export function tokenRoute(
  deps: TokenDeps,
  options: { audit?: AuditTrail; refused?: (reason: string) => void } = {},
): (app: express.Express) => void {
  const form = express.urlencoded({ extended: false, limit: '16kb', parameterLimit: 20 });
  const formOnly: RequestHandler = (req, _res, next) => {
    if (!req.is('application/x-www-form-urlencoded')) {
      next(new OAuthError('invalid_request', 'send the request as application/x-www-form-urlencoded'));
      return;
    }
    next();
  };
  const onError: ErrorRequestHandler = (error: unknown, _req, res, next) => {
    if (error instanceof OAuthError) {
      options.refused?.('token-request');
      sendOAuthError(res, error);
      return;
    }
    const status = (error as { status?: unknown }).status;
    if (typeof status === 'number' && status >= 400 && status < 500) {
      sendOAuthError(res, new OAuthError('invalid_request', 'the request body could not be read'));
      return;
    }
    next(error);
  };
  return (app) => {
    app.post('/auth/token', formOnly, form, async (req, res, next) => {
      try {
        const body = (req.body ?? {}) as Record<string, unknown>;
        const answer = await issueToken(body, deps);
        options.audit?.record({
          tenantId: answer.tenantId,
          agentId: answer.clientId,
          agentKind: 'client',
          action: 'E',
          interaction: 'operation',
          operation: 'token',
          outcome: '0',
        });
        res.status(200).set({ 'Cache-Control': 'no-store', Pragma: 'no-cache' }).json({
          access_token: answer.access_token,
          token_type: answer.token_type,
          expires_in: answer.expires_in,
          scope: answer.scope,
        });
      } catch (error) {
        next(error);
      }
    });
    app.use('/auth/token', onError);
  };
}
