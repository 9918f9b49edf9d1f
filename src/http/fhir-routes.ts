/**
 * Every route under /fhir, registered in one place: content negotiation, the public reads
 * (CapabilityStatement, the conformance resources), authentication, then the check routes. Each
 * route translates an express request into a FhirRequest, calls an operation (src/operations/),
 * and writes its FhirAnswer. No domain logic here.
 */
import express from 'express';
import type { Request, RequestHandler, Response, Router } from 'express';
import type { Tenant } from '../config.js';
import { asyncDelete, asyncStatus } from '../operations/async.js';
import { readConformance } from '../operations/conformance-read.js';
import { capabilityStatement, type CapabilityFeatures } from '../operations/metadata.js';
import { readRequest, readResponse, vreadResponse, type CerCache } from '../operations/read.js';
import { searchRequests, searchResponses } from '../operations/search/index.js';
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
import { fhirBody, negotiate, sendAnswer, sendResource } from './fhir-json.js';
import { authenticate } from './middleware.js';
import { submitRateLimit } from './rate-limit.js';

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
}

/** Builds the FhirRequest of an express request (after authentication). */
export function toFhirRequest(req: Request, res: Response): FhirRequest {
  return {
    params: req.params as Record<string, string>,
    query: req.query as FhirRequest['query'],
    body: req.body as unknown,
    prefer: req.header('prefer'),
    ifNoneMatch: req.header('if-none-match'),
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

/** The /fhir router, with every FHIR route. */
export function fhirRouter(deps: FhirRouteDeps): Router {
  const router = express.Router();
  router.use(negotiate);
  const metadataDate = new Date().toISOString();
  router.get('/metadata', (_req, res) => {
    sendResource(res, 200, capabilityStatement(deps.features, deps.baseUrl, deps.version, metadataDate));
  });
  for (const type of deps.features.conformance) {
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

  router.use(authenticate(deps.tenants));
  if (deps.subscriptions) subscriptionRoutes(router, deps.subscriptions);
  router.post(
    '/CoverageEligibilityRequest/$submit',
    submitRateLimit(deps.submitRatePerMinute),
    fhirBody,
    operation((req) => submit(req, deps.submit)),
  );
  router.get(
    '/CoverageEligibilityRequest',
    operation((req) => searchRequests(req, deps.checks, deps.baseUrl)),
  );
  router.get(
    '/CoverageEligibilityRequest/:id',
    operation((req) => readRequest(req, deps.checks)),
  );
  router.get(
    '/CoverageEligibilityResponse/:id',
    operation((req) => readResponse(req, deps.checks, deps.cerCache)),
  );
  router.get(
    '/CoverageEligibilityResponse/:id/_history/:vid',
    operation((req) => vreadResponse(req, deps.checks)),
  );
  router.get(
    '/CoverageEligibilityResponse',
    operation((req) => searchResponses(req, deps.checks, deps.baseUrl)),
  );
  router.get('/Binary/:id', async (req, res) => {
    await streamDocument(toFhirRequest(req, res), res, deps);
  });
  router.get(
    '/_async/:id',
    operation((req) => asyncStatus(req, deps.checks, deps.baseUrl, deps.pollIntervalMs)),
  );
  router.delete(
    '/_async/:id',
    operation((req) => asyncDelete(req, deps.checks)),
  );
  return router;
}

/**
 * Subscriptions (R4 backport of topic-based subscriptions): every route in this one block, after
 * authentication, so per-route middleware (scopes, audit) can be attached here.
 */
function subscriptionRoutes(router: Router, deps: SubscriptionDeps): void {
  router.post(
    '/Subscription',
    fhirBody,
    operation((req) => createSubscription(req, deps)),
  );
  router.get(
    '/Subscription',
    operation((req) => searchSubscriptions(req, deps)),
  );
  router.get(
    '/Subscription/:id/$status',
    operation((req) => subscriptionStatus(req, deps)),
  );
  router.get(
    '/Subscription/:id/$events',
    operation((req) => subscriptionEvents(req, deps)),
  );
  router.get(
    '/Subscription/:id',
    operation((req) => readSubscription(req, deps)),
  );
  router.put(
    '/Subscription/:id',
    fhirBody,
    operation((req) => updateSubscription(req, deps)),
  );
  router.delete(
    '/Subscription/:id',
    operation((req) => deleteSubscription(req, deps)),
  );
}
