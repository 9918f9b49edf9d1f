/**
 * CDS Hooks 2.0 over HTTP (docs/cds-hooks.md): `GET /cds-services` (discovery, public),
 * `POST /cds-services/{id}` (a hook call) and `POST /cds-services/{id}/feedback`. Every call but
 * discovery carries the CDS Client's JWT (https://cds-hooks.hl7.org/2.0/#trusting-cds-clients):
 * a refusal is 401 with no card and no check, counted in the operator's log without the token.
 * Each call is an AuditEvent like `$submit`, and counted per service and outcome.
 */
import express from 'express';
import type { RequestHandler, Response } from 'express';
import type { AuditTrail } from '../checks/audit.js';
import type { AuditOperation } from '../fhir/audit-event.js';
import type { CdsMetrics } from '../metrics.js';
import { notFound, OperationOutcomeError, outcome } from '../fhir/outcomes.js';
import { CdsAuthError, verifyCdsJwt, type CdsCaller, type CdsJwtDeps } from '../operations/auth/cds-jwt.js';
import { appointmentBook, patientView, type HookDeps } from '../operations/cds-hooks/hooks.js';
import { CDS_SERVICES, cdsService, discovery, readFeedback } from '../operations/cds-hooks/services.js';
import { checkRawDepth, INPUT_LIMITS } from './input-limits.js';
import type { Principal } from './middleware.js';
import { audited, listedEntities } from './security.js';

export interface CdsRouteDeps {
  baseUrl: string;
  jwt: CdsJwtDeps;
  hooks: HookDeps;
  audit?: AuditTrail;
  metrics: CdsMetrics;
  /** Counts a refused call for the operator's log (never the token). */
  refused: (reason: string) => void;
}

/**
 * A CDS Hooks body is JSON, not a FHIR resource (its names are snake_case: `access_token`): the
 * size and nesting limits of a FHIR body apply, the FHIR property-name rule does not (the FHIR
 * resources inside are validated when they are read as a check).
 */
const cdsBody = express.json({
  limit: INPUT_LIMITS.bodyBytes,
  strict: false,
  type: ['application/json', 'application/*+json'],
  verify: (_req, _res, raw) => checkRawDepth(raw),
});

const HOOKS = { 'appointment-book': appointmentBook, 'patient-view': patientView } as const;

/** The outcome label of a finished call, from its status. */
function outcomeOf(status: number): string {
  if (status < 300) return 'answered';
  if (status === 401) return 'refused';
  if (status === 412) return 'prefetch-failed';
  return status < 500 ? 'bad-request' : 'error';
}

/** The service named in the path, or 404 before anything else is read. */
const knownService: RequestHandler = (req, _res, next) => {
  if (!cdsService(String(req.params.id))) {
    next(notFound('No CDS Service with this id; GET /cds-services lists them'));
    return;
  }
  next();
};

/** The call's JWT, checked against the service's own URL (its `aud`). */
function authenticateCds(deps: CdsRouteDeps): RequestHandler {
  return (req, res, next) => {
    const id = String(req.params.id);
    verifyCdsJwt(req.header('authorization'), `${deps.baseUrl}/cds-services/${id}`, deps.jwt).then(
      (caller) => {
        const principal: Principal = {
          tenant: caller.tenant,
          kind: 'client',
          id: caller.client.iss,
          scopes: null,
        };
        res.locals.tenant = caller.tenant;
        res.locals.principal = principal;
        res.locals.cdsCaller = caller;
        next();
      },
      (error: unknown) => {
        if (!(error instanceof CdsAuthError)) {
          next(error);
          return;
        }
        deps.refused(`cds-${error.reason}`);
        next(
          new OperationOutcomeError(outcome('login', error.message), 401, {
            'WWW-Authenticate': 'Bearer realm="cds-services", error="invalid_token"',
          }),
        );
      },
    );
  };
}

/** Counts the call by its status once answered. */
function counted(deps: CdsRouteDeps, label: (id: string) => string): RequestHandler {
  return (req, res, next) => {
    const service = String(req.params.id);
    res.on('finish', () => {
      if (cdsService(service)) deps.metrics.call(label(service), outcomeOf(res.statusCode));
    });
    next();
  };
}

function sendJson(res: Response, body: unknown): void {
  res.status(200).set('Cache-Control', 'no-store').json(body);
}

/** An AuditEvent per call, its operation named after the service (`cds:eligibility-patient-view`). */
function auditedCall(deps: CdsRouteDeps, suffix: '' | '/feedback', entities: boolean): RequestHandler {
  const byService = new Map(
    CDS_SERVICES.map((s) => [
      s.id,
      audited(deps.audit, {
        action: 'E',
        interaction: 'operation',
        operation: `cds:${s.id}${suffix}` as AuditOperation,
        ...(entities ? { entity: listedEntities } : {}),
      }),
    ]),
  );
  return (req, res, next) => {
    const handler = byService.get(String(req.params.id));
    if (handler) handler(req, res, next);
    else next();
  };
}

/** Registers the /cds-services routes on the app (their full paths: logs and metrics name them). */
export function cdsRoutes(deps: CdsRouteDeps): (app: express.Express) => void {
  return (app) => registerCds(app, deps);
}

function registerCds(app: express.Express, deps: CdsRouteDeps): void {
  // Discovery is public: it lists services and prefetch templates, no tenant data.
  app.get('/cds-services', (_req, res) => {
    sendJson(res, discovery());
  });
  app.post(
    '/cds-services/:id',
    counted(deps, (id) => id),
    knownService,
    authenticateCds(deps),
    auditedCall(deps, '', true),
    cdsBody,
    async (req, res) => {
      const service = cdsService(String(req.params.id))!;
      const answer = await HOOKS[service.hook](
        req.body as unknown,
        res.locals.cdsCaller as CdsCaller,
        deps.hooks,
      );
      res.locals.auditEntities = answer.checkIds.map((id) => `CoverageEligibilityResponse/${id}`);
      for (const card of answer.cards) deps.metrics.card(service.id, card.indicator);
      sendJson(res, { cards: answer.cards });
    },
  );
  app.post(
    '/cds-services/:id/feedback',
    counted(deps, (id) => `${id}/feedback`),
    knownService,
    authenticateCds(deps),
    auditedCall(deps, '/feedback', false),
    cdsBody,
    (req, res) => {
      const service = String(req.params.id);
      for (const result of readFeedback(req.body)) deps.metrics.feedback(service, result);
      sendJson(res, {});
    },
  );
}
