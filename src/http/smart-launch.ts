/**
 * SMART App Launch of the page (docs/smart-launch.md): `GET /app/launch` (EHR launch with `iss`
 * and `launch`, or standalone without `launch`), `GET /app/launch/callback`, and
 * `GET /app/api/launch-context`, what the page opens with. The EHR's access token stays in the
 * session row on the server; the browser gets the session cookie and the context, never the token.
 * https://hl7.org/fhir/smart-app-launch/app-launch.html
 */
import express from 'express';
import type { Request, RequestHandler, Response, Router } from 'express';
import type { Tenant } from '../config.js';
import type { CheckStore } from '../checks/store/check-store.js';
import type { AuditTrail } from '../checks/audit.js';
import { OperationOutcomeError, outcome } from '../fhir/outcomes.js';
import { latestAnswer, readLaunchContext, readUserName } from '../operations/auth/ehr-context.js';
import type { LaunchContext } from '../operations/auth/ehr-context.js';
import {
  authorizationRequest,
  exchangeCode,
  LaunchError,
  newCodeVerifier,
  tenantOfIss,
} from '../operations/auth/smart-app.js';
import { payerDisplay } from '../mapping/request/tables.js';
import type { SessionPerson, Sessions } from './sessions.js';

export interface SmartLaunchDeps {
  tenants: readonly Tenant[];
  sessions: Sessions;
  store: Pick<CheckStore, 'search'>;
  /** PUBLIC_BASE_URL (or http://localhost:<port>): the redirect URI's base. */
  baseUrl: string;
  /** Sign-ins from the EHR, and refused ones, are AuditEvents (DICOM 110114 / 110122 Login). */
  audit?: AuditTrail;
}

/** What the session keeps of a launch, server-side only (the session row's `data.smart`). */
interface LaunchData {
  iss: string;
  /** The EHR's access token: read by this service only, dropped with the session. */
  accessToken: string;
  context: LaunchContext;
}

/** The pending launch (`Sessions.startLogin` data) the callback takes back. */
interface PendingData {
  iss: string;
  codeVerifier: string;
}

/** A launch `launch` value: opaque to the page, printable, bounded. */
const LAUNCH = /^[\x21-\x7e]{1,2048}$/;

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** A small page that says why a launch did not go on (no redirect, nothing of the request echoed). */
function refusal(res: Response, status: number, message: string): void {
  res
    .status(status)
    .type('html')
    .setHeader('Cache-Control', 'no-store')
    .send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Eligibility: launch not completed</title></head>` +
        `<body><h1>The page could not be opened from the EHR</h1><p>${escapeHtml(message)}</p>` +
        `<p><a href="/app/">Open the eligibility page</a></p></body></html>`,
    );
}

/** The EHR FHIR base of a launch: `iss`, else the only one any tenant registered (standalone). */
function issOf(req: Request, tenants: readonly Tenant[]): string | undefined {
  const iss = req.query.iss;
  if (typeof iss === 'string' && iss !== '') return iss;
  const bases = tenants.flatMap((t) => t.smartLaunch?.fhirBaseUrls ?? []);
  return bases.length === 1 ? bases[0] : undefined;
}

const noStore: RequestHandler = (_req, res, next) => {
  res.setHeader('Cache-Control', 'no-store');
  next();
};

/** A Login AuditEvent of a launch: who (when known), and whether it worked; never a token or code. */
function auditLogin(
  audit: AuditTrail | undefined,
  tenant: Tenant,
  person: SessionPerson | undefined,
  failure: string | undefined,
): void {
  audit?.record({
    tenantId: tenant.id,
    agentId: person?.subject ?? 'unknown',
    agentKind: 'person',
    ...(person
      ? {
          person: {
            issuer: person.issuer,
            subject: person.subject,
            name: person.name,
            ...(person.fhirUser ? { reference: person.fhirUser } : {}),
          },
        }
      : {}),
    action: 'E',
    interaction: 'login',
    operation: 'smart-launch',
    outcome: failure ? '4' : '0',
    ...(failure ? { outcomeDesc: failure } : {}),
  });
}

/** The launch and callback routes, mounted on /app. */
export function smartLaunchRoutes(deps: SmartLaunchDeps): Router {
  const router = express.Router();
  const redirectUri = `${deps.baseUrl}/app/launch/callback`;

  router.get('/launch', noStore, async (req, res) => {
    const iss = issOf(req, deps.tenants);
    if (!iss) {
      refusal(res, 400, 'Open the page from the EHR, or give the EHR FHIR base as ?iss=.');
      return;
    }
    // An unregistered iss is refused before any request goes to it: no redirect, no fetch.
    // https://hl7.org/fhir/smart-app-launch/app-launch.html#launch-app-ehr-launch
    const found = tenantOfIss(deps.tenants, iss);
    if (!found) {
      refusal(res, 400, 'This EHR is not registered for the eligibility page.');
      return;
    }
    const launch =
      typeof req.query.launch === 'string' && req.query.launch !== '' ? req.query.launch : undefined;
    if (launch !== undefined && !LAUNCH.test(launch)) {
      refusal(res, 400, 'The launch parameter is not usable.');
      return;
    }
    res.locals.tenant = found.tenant;
    try {
      const codeVerifier = newCodeVerifier();
      const pending: PendingData = { iss: found.iss, codeVerifier };
      const state = await deps.sessions.startLogin(found.tenant.id, 'smart', { ...pending });
      const url = await authorizationRequest({
        smart: found.smart,
        iss: found.iss,
        launch,
        state,
        codeVerifier,
        redirectUri,
      });
      res.redirect(302, url.href);
    } catch (error) {
      if (!(error instanceof LaunchError)) throw error;
      refusal(res, error.status, error.message);
    }
  });

  router.get('/launch/callback', noStore, async (req, res) => {
    const state = typeof req.query.state === 'string' ? req.query.state : '';
    const pending = state ? await deps.sessions.takeLogin(state, 'smart') : null;
    if (!pending) {
      refusal(
        res,
        400,
        'This launch is unknown, expired or was already used: open the page from the EHR again.',
      );
      return;
    }
    const tenant = deps.tenants.find((t) => t.id === pending.tenantId);
    const data = pending.data as Partial<PendingData>;
    if (!tenant?.smartLaunch || typeof data.iss !== 'string' || typeof data.codeVerifier !== 'string') {
      refusal(res, 400, 'This launch is no longer configured.');
      return;
    }
    res.locals.tenant = tenant;
    if (typeof req.query.error === 'string') {
      // The EHR's error code only (a fixed vocabulary, RFC 6749 4.1.2.1), never its free text.
      const code = /^[a-z_]{1,64}$/.test(req.query.error) ? req.query.error : 'error';
      auditLogin(deps.audit, tenant, undefined, `the EHR answered ${code}`);
      refusal(res, 401, `The EHR did not authorize the page (${code}).`);
      return;
    }
    try {
      const grant = await exchangeCode({
        smart: tenant.smartLaunch,
        pending: { iss: data.iss, codeVerifier: data.codeVerifier },
        callbackUrl: new URL(`${redirectUri}${req.url.slice(req.url.indexOf('?'))}`),
        state,
      });
      if (!grant.patient) throw new LaunchError(502, 'The EHR did not say which patient is open.');
      const context = await readLaunchContext({
        iss: data.iss,
        accessToken: grant.accessToken,
        patient: grant.patient,
        appointment: grant.appointment,
      });
      const smart: LaunchData = { iss: data.iss, accessToken: grant.accessToken, context };
      // The person is the EHR's user: its fhirUser (a Practitioner ...), else the ID token's sub.
      const person: SessionPerson = {
        issuer: grant.person.issuer,
        subject: grant.person.sub,
        name:
          grant.person.name ??
          (grant.person.fhirUser
            ? ((await readUserName(data.iss, grant.accessToken, grant.person.fhirUser)) ??
              grant.person.fhirUser)
            : grant.person.sub),
        ...(grant.person.fhirUser ? { fhirUser: grant.person.fhirUser } : {}),
      };
      await deps.sessions.create(res, { tenantId: tenant.id, person, roles: [], data: { smart } });
      auditLogin(deps.audit, tenant, person, undefined);
      res.redirect(302, '/app/');
    } catch (error) {
      if (!(error instanceof LaunchError)) throw error;
      auditLogin(deps.audit, tenant, undefined, error.message);
      refusal(res, error.status, error.message);
    }
  });
  return router;
}

/**
 * `GET /app/api/launch-context`: the launch's patient, payer and visit, and the latest answer for
 * that patient and payer; 404 when the session was not opened by a launch. Never the EHR's token.
 */
export function launchContextRoute(store: Pick<CheckStore, 'search'>): RequestHandler {
  return async (_req, res) => {
    const session = res.locals.session as { data?: { smart?: LaunchData } } | undefined;
    const launch = session?.data?.smart;
    if (!launch) {
      throw new OperationOutcomeError(outcome('not-found', 'This session was not opened from the EHR'), 404);
    }
    const tenant = res.locals.tenant as Tenant;
    const { context } = launch;
    res.setHeader('Cache-Control', 'no-store');
    res.json({
      patient: context.patient,
      payer: context.payer
        ? { code: context.payer, display: payerDisplay(context.payer) ?? context.payer }
        : null,
      visitStart: context.visitStart,
      latest: await latestAnswer(store, tenant.id, context),
    });
  };
}
