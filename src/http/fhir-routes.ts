/**
 * Every route under /fhir, registered in one place: content negotiation, the public reads
 * (CapabilityStatement, the conformance resources), authentication, then the check routes. Each
 * route translates an express request into a FhirRequest, calls an operation (src/operations/),
 * and writes its FhirAnswer. No domain logic here.
 */
import type { Bundle, DocumentReference } from 'fhir/r4.js';
import express from 'express';
import type { Request, RequestHandler, Response, Router } from 'express';
import type { Tenant } from '../config.js';
import { asyncDelete } from '../operations/async.js';
import { estimate } from '../operations/estimate.js';
import { asyncStatusOrBatch, batch } from '../operations/batch.js';
import { validateSubmit } from '../operations/validate.js';
import { readConformance, searchConformance } from '../operations/conformance-read.js';
import { packageTarball } from '../operations/conformance-package.js';
import { CAPABILITY_DATE, capabilityStatement, type CapabilityFeatures } from '../operations/metadata.js';
import { readRequest, readResponse, vreadResponse, type CerCache } from '../operations/read.js';
import { searchRequests, searchResponses } from '../operations/search/index.js';
import { searchDocumentReferences } from '../operations/document-references.js';
import { submit } from '../operations/submit.js';
import {
  createSubscription,
  deleteSubscription,
  readSubscription,
  readTopic,
  searchSubscriptions,
  updateSubscription,
  subscriptionEvents,
  subscriptionStatus,
  type SubscriptionDeps,
} from '../operations/subscriptions.js';
import type { SubmitDeps } from '../operations/submit.js';
import type { FhirAnswer, FhirRequest } from '../operations/types.js';
import { streamDocument, type DocumentProxyDeps } from './binary-route.js';
import { batchBody, fhirBody, jsonPatchBody, negotiate, sendAnswer, sendResource } from './fhir-json.js';
import { patchRequest } from '../operations/cancel.js';
import type { PrevisitEvent } from '../checks/previsit.js';
import { authenticate } from './middleware.js';
import type { AuthenticateOptions } from './middleware.js';
import { submitRateLimit } from './rate-limit.js';
import type { AuditTrail } from '../checks/audit.js';
import { readAuditEvent, searchAuditEvents, type AuditStore } from '../operations/audit-events.js';
import {
  audited,
  CER_READ_AUDIT,
  listedEntities,
  locationEntity,
  locationOf,
  paramEntity,
  requireScope,
  smartConfiguration,
} from './security.js';
import type { AuditTrail as Audit } from '../checks/audit.js';

export interface FhirRouteDeps extends DocumentProxyDeps {
  tenants: readonly Tenant[];
  submit: SubmitDeps;
  baseUrl: string;
  pollIntervalMs: number;
  submitRatePerMinute: number;
  /** The CapabilityStatement's parts and the published conformance resources. */
  features: CapabilityFeatures;
  version: string;
  /** Encoded CERs of recent reads. */
  cerCache: CerCache;
  /** Subscriptions (docs/notifications.md); absent: not served. */
  subscriptions?: SubscriptionDeps;
  /** SMART access tokens, the audit trail and its store (docs/auth.md); absent = API keys only, no audit. */
  security?: AuthenticateOptions & { audit?: AuditTrail; auditStore?: AuditStore };
  /** Metrics of pre-visit checks (a cancelled re-check). */
  onPrevisit?: (event: PrevisitEvent) => void;
  /**
   * Replaces the bearer authentication: the page's copy of these routes under /app/api/fhir is
   * behind the page's own sign-in (src/http/app-page.ts).
   */
  authenticateWith?: RequestHandler;
}

/** Builds the FhirRequest of an express request (after authentication). */
export function toFhirRequest(req: Request, res: Response): FhirRequest {
  return {
    params: req.params as Record<string, string>,
    query: req.query as FhirRequest['query'],
    body: req.body as unknown,
    prefer: req.header('prefer'),
    ifNoneMatch: req.header('if-none-match'),
    cacheControl: req.header('cache-control'),
    tenant: res.locals.tenant as Tenant,
    requestId: String(res.locals.requestId),
  };
}

/** Wraps a FHIR core operation as an express handler. */
export function operation(run: (req: FhirRequest) => Promise<FhirAnswer>): RequestHandler {
  return async (req, res) => {
    sendAnswer(res, await run(toFhirRequest(req, res)));
  };
}

/**
 * A FHIR route the app matches at its own level, ahead of the /fhir router (src/http/app.ts): the
 * same handlers, in the same order, as it would run inside the router (content negotiation,
 * authentication, then its own), so nothing but the walk to it changes.
 */
export interface DirectRoute {
  method: 'get';
  /** Below /fhir. */
  path: string;
  handlers: RequestHandler[];
}

export interface FhirRoutes {
  /** Every route under /fhir but the direct ones. */
  router: Router;
  /**
   * The CER read, the hot path of a polling client: about 20 route layers of the router (the
   * public reads, the subscriptions, the POSTs) are not walked before it (bench/README.md, figure 2).
   */
  direct: DirectRoute[];
}

/** The /fhir routes: the router, and the routes the app matches ahead of it. */
export function fhirRoutes(deps: FhirRouteDeps): FhirRoutes {
  const router = express.Router();
  // The FHIR package (docs/validation.md), public and before content negotiation: it is no FHIR
  // JSON, and a validator asks for it with whatever Accept it sends. Built now, not on a request.
  void packageTarball();
  router.get('/package.tgz', async (req, res) => {
    const tgz = await packageTarball();
    res.set({
      'Content-Type': 'application/gzip',
      'Content-Disposition': `attachment; filename="${tgz.fileName}"`,
      'Cache-Control': 'public, max-age=3600',
      ETag: tgz.etag,
    });
    if (req.fresh) res.status(304).end();
    else res.status(200).send(tgz.bytes);
  });
  router.use(negotiate);
  router.get('/metadata', (_req, res) => {
    sendResource(res, 200, capabilityStatement(deps.features, deps.baseUrl, deps.version, CAPABILITY_DATE));
  });
  for (const type of deps.features.conformance) {
    // Canonical resolution: ?url=<canonical>[&version=] (docs/validation.md).
    router.get(`/${type}`, (req, res) => {
      sendAnswer(res, searchConformance(type, req.query, deps.baseUrl, req.header('prefer')));
    });
    router.get(`/${type}/:id`, (req, res) => {
      sendAnswer(res, readConformance(type, String(req.params.id)));
    });
  }

  if (deps.subscriptions) {
    // The topic is public, like the CapabilityStatement: it holds no tenant data.
    router.get('/Basic/:id', (req, res) => {
      sendAnswer(res, readTopic(String(req.params.id)));
    });
  }
  router.get('/.well-known/smart-configuration', (_req, res) => {
    res.status(200).json(smartConfiguration(deps.baseUrl));
  });

  const auth = deps.authenticateWith ?? authenticate(deps.tenants, deps.security);
  router.use(auth);
  const audit = deps.security?.audit;
  const CER = 'CoverageEligibilityResponse';
  const REQ = 'CoverageEligibilityRequest';
  const direct: DirectRoute[] = [
    {
      method: 'get',
      path: '/CoverageEligibilityResponse/:id',
      handlers: [
        negotiate,
        auth,
        audited(audit, CER_READ_AUDIT),
        requireScope(CER, 'r'),
        operation((req) => readResponse(req, deps.checks, deps.cerCache)),
      ],
    },
  ];
  // $submit first after authentication: no other route's path matches it, so the seven
  // Subscription routes (registered after it) are not walked for every $submit.
  router.post(
    '/CoverageEligibilityRequest/$submit',
    audited(audit, { action: 'E', interaction: 'operation', operation: '$submit', entity: locationEntity }),
    requireScope(REQ, 'c'),
    submitRateLimit(deps.submitRatePerMinute),
    fhirBody,
    operation((req) => submit(req, deps.submit)),
  );
  if (deps.subscriptions) subscriptionRoutes(router, deps.subscriptions, audit);
  // Batch (issue 17, docs/batch-and-reuse.md): one request against the $submit rate limit.
  router.post(
    '/',
    audited(audit, { action: 'E', interaction: 'batch', entity: listedEntities }),
    requireScope(REQ, 'c'),
    submitRateLimit(deps.submitRatePerMinute),
    batchBody,
    async (req, res) => {
      const answer = await batch(toFhirRequest(req, res), deps.submit);
      res.locals.auditEntities = batchEntities(answer);
      sendAnswer(res, answer);
    },
  );
  // A dry run of $submit: the same permission, nothing stored, so nothing audited.
  router.post(
    '/CoverageEligibilityRequest/$validate',
    requireScope(REQ, 'c'),
    fhirBody,
    operation((req) => validateSubmit(req, deps.submit)),
  );
  router.get(
    '/CoverageEligibilityRequest',
    audited(audit, { action: 'E', interaction: 'search-type' }),
    requireScope(REQ, 's'),
    operation((req) => searchRequests(req, deps.checks, deps.baseUrl)),
  );
  router.get(
    '/CoverageEligibilityRequest/:id',
    audited(audit, { action: 'R', interaction: 'read', entity: paramEntity(REQ) }),
    requireScope(REQ, 'r'),
    operation((req) => readRequest(req, deps.checks)),
  );
  // Cancelling an appointment (docs/previsit.md): JSON Patch of /status only.
  router.patch(
    '/CoverageEligibilityRequest/:id',
    audited(audit, { action: 'U', interaction: 'patch', entity: paramEntity(REQ) }),
    requireScope(REQ, 'u'),
    jsonPatchBody,
    operation((req) =>
      patchRequest(req, { ...deps.submit, ...(deps.onPrevisit ? { onPrevisit: deps.onPrevisit } : {}) }),
    ),
  );
  // GET /CoverageEligibilityResponse/:id: a direct route (above), matched by the app first.
  router.get(
    '/CoverageEligibilityResponse/:id/_history/:vid',
    audited(audit, { action: 'R', interaction: 'vread', entity: paramEntity(CER) }),
    requireScope(CER, 'r'),
    operation((req) => vreadResponse(req, deps.checks)),
  );
  // The patient's share from a stored answer (issue 28, docs/estimate.md): reads the CER only.
  router.post(
    '/CoverageEligibilityResponse/:id/$estimate',
    audited(audit, {
      action: 'E',
      interaction: 'operation',
      operation: '$estimate',
      entity: paramEntity(CER),
    }),
    requireScope(CER, 'rs'),
    fhirBody,
    operation((req) => estimate(req, { checks: deps.checks, now: deps.submit.now })),
  );
  router.get(
    '/CoverageEligibilityResponse',
    audited(audit, { action: 'E', interaction: 'search-type' }),
    requireScope(CER, 's'),
    operation((req) => searchResponses(req, deps.checks, deps.baseUrl)),
  );
  // The kept documents (docs/evidence.md); the audit names the answers whose documents were listed.
  router.get(
    '/DocumentReference',
    audited(audit, { action: 'E', interaction: 'search-type', entity: listedEntities }),
    requireScope('DocumentReference', 's'),
    async (req, res) => {
      const answer = await searchDocumentReferences(toFhirRequest(req, res), deps.evidence, deps.baseUrl);
      res.locals.auditEntities = relatedEntities(answer);
      sendAnswer(res, answer);
    },
  );
  // A document of a check and a check's async status are parts of the check's answer.
  router.get(
    '/Binary/:id',
    audited(audit, { action: 'R', interaction: 'read', entity: paramEntity('Binary') }),
    requireScope(CER, 'r'),
    async (req, res) => {
      await streamDocument(toFhirRequest(req, res), res, deps);
    },
  );
  // The async status of a check or a batch: reading it hands back answers, so it is audited;
  // stopping the tracking changes what the submitter sees, so it needs the submitter's scope.
  router.get(
    '/_async/:id',
    audited(audit, { action: 'R', interaction: 'read' }),
    requireScope(CER, 'r'),
    operation((req) => asyncStatusOrBatch(req, deps.submit, deps.pollIntervalMs)),
  );
  router.delete(
    '/_async/:id',
    audited(audit, { action: 'D', interaction: 'delete' }),
    requireScope(REQ, 'c'),
    operation((req) => asyncDelete(req, deps.checks)),
  );
  const auditStore = deps.security?.auditStore;
  if (auditStore) {
    router.get(
      '/AuditEvent',
      audited(audit, { action: 'E', interaction: 'search-type' }),
      requireScope('AuditEvent', 's'),
      operation((req) => searchAuditEvents(req, auditStore, deps.baseUrl)),
    );
    router.get(
      '/AuditEvent/:id',
      audited(audit, { action: 'R', interaction: 'read', entity: paramEntity('AuditEvent') }),
      requireScope('AuditEvent', 'r'),
      operation((req) => readAuditEvent(req, auditStore)),
    );
  }
  return { router, direct };
}

/**
 * Subscriptions (R4 backport of topic-based subscriptions): every route in this one block, after
 * authentication, so per-route middleware (scopes, audit) can be attached here.
 */
function subscriptionRoutes(router: Router, deps: SubscriptionDeps, audit: Audit | undefined): void {
  const SUB = 'Subscription';
  router.post(
    '/Subscription',
    audited(audit, { action: 'C', interaction: 'create', entity: locationOf(SUB) }),
    requireScope(SUB, 'c'),
    fhirBody,
    operation((req) => createSubscription(req, deps)),
  );
  router.get(
    '/Subscription',
    audited(audit, { action: 'E', interaction: 'search-type' }),
    requireScope(SUB, 's'),
    operation((req) => searchSubscriptions(req, deps)),
  );
  router.get(
    '/Subscription/:id/$status',
    audited(audit, { action: 'E', interaction: 'operation', operation: '$status', entity: paramEntity(SUB) }),
    requireScope(SUB, 'r'),
    operation((req) => subscriptionStatus(req, deps)),
  );
  router.get(
    '/Subscription/:id/$events',
    audited(audit, { action: 'E', interaction: 'operation', operation: '$events', entity: paramEntity(SUB) }),
    requireScope(SUB, 'r'),
    operation((req) => subscriptionEvents(req, deps)),
  );
  router.get(
    '/Subscription/:id',
    audited(audit, { action: 'R', interaction: 'read', entity: paramEntity(SUB) }),
    requireScope(SUB, 'r'),
    operation((req) => readSubscription(req, deps)),
  );
  router.put(
    '/Subscription/:id',
    audited(audit, { action: 'U', interaction: 'update', entity: paramEntity(SUB) }),
    requireScope(SUB, 'u'),
    fhirBody,
    operation((req) => updateSubscription(req, deps)),
  );
  router.delete(
    '/Subscription/:id',
    audited(audit, { action: 'D', interaction: 'delete', entity: paramEntity(SUB) }),
    requireScope(SUB, 'd'),
    operation((req) => deleteSubscription(req, deps)),
  );
}

/** The answers a DocumentReference searchset's documents belong to, once each, for the audit trail. */
function relatedEntities(answer: FhirAnswer): string[] {
  const bundle = answer.body?.resourceType === 'Bundle' ? (answer.body as Bundle) : undefined;
  const found = new Set<string>();
  for (const entry of bundle?.entry ?? []) {
    const doc =
      entry.resource?.resourceType === 'DocumentReference'
        ? (entry.resource as DocumentReference)
        : undefined;
    for (const related of doc?.context?.related ?? []) if (related.reference) found.add(related.reference);
  }
  return [...found];
}

/** The checks a batch-response points to (each entry's location), for the audit trail. */
function batchEntities(answer: FhirAnswer): string[] {
  const bundle = answer.body?.resourceType === 'Bundle' ? (answer.body as Bundle) : undefined;
  const found: string[] = [];
  for (const entry of bundle?.entry ?? []) {
    const match = /(CoverageEligibilityResponse\/[A-Za-z0-9\-.]{1,64})(?:\/_history\/[^/]+)?$/.exec(
      entry.response?.location ?? '',
    );
    if (match?.[1]) found.push(match[1]);
  }
  return found;
}
