/**
 * Sessions of people signed in to the page (docs/signin.md): the `eligibility_session` cookie, the
 * session row it names in the store (by the id's SHA-256), idle and absolute ends, the CSRF token
 * of each session, and the pending sign-ins between a redirect to a provider and its callback.
 * The OpenID Connect sign-in (oidc.ts) and the SMART App Launch create sessions through
 * `Sessions.create`; /app/api reads them through `sessionAuth`.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Request, RequestHandler, Response } from 'express';
import type { Tenant } from '../config.js';
import type {
  PendingLogin,
  SessionPerson,
  SessionStore,
  StoredSession,
} from '../checks/store/session-store.js';
import { OperationOutcomeError, outcome } from '../fhir/outcomes.js';
import { parseScope } from '../operations/auth/scopes.js';
import type { Scope } from '../operations/auth/scopes.js';
import type { Principal } from './middleware.js';

export type { SessionPerson } from '../checks/store/session-store.js';

export const SESSION_COOKIE = 'eligibility_session';
/** How long a sign-in may take between the redirect to the provider and its callback. */
export const PENDING_LOGIN_MS = 10 * 60_000;
/** The idle clock is moved on at most this often (one write per session per minute at most). */
const TOUCH_EVERY_MS = 60_000;

export interface SessionSettings {
  store: SessionStore;
  /** SESSION_IDLE_MINUTES in ms. */
  idleMs: number;
  /** SESSION_MAX_HOURS in ms. */
  maxMs: number;
  /** The cookie is `Secure` (PUBLIC_BASE_URL is https). */
  secure: boolean;
  now: () => number;
}

/** What a sign-in hands over to make a session. */
export interface NewSession {
  tenantId: string;
  person: SessionPerson;
  roles: readonly string[];
  /** Server-side only: never sent to the browser (an ID token for logout, an EHR access token). */
  data?: Record<string, unknown>;
}

/** A live session, as a request sees it. */
export interface ActiveSession extends StoredSession {
  /** When it ends if unused from now on: the idle end or the absolute end, whichever is first. */
  endsAt: number;
}

/** SHA-256 hex: how the store names a session (by its cookie) and a pending sign-in (by its state). */
export function digest(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

/** 256 random bits, base64url. */
export function randomToken(): string {
  return randomBytes(32).toString('base64url');
}

/** The value of one cookie of a request, or undefined. */
export function cookieOf(req: Request, name: string): string | undefined {
  const header = req.headers.cookie;
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const at = part.indexOf('=');
    if (at < 0) continue;
    if (part.slice(0, at).trim() === name) return part.slice(at + 1).trim();
  }
  return undefined;
}

/** A session id as the cookie carries it: 43 base64url characters (256 bits). */
const SESSION_ID = /^[A-Za-z0-9_-]{43}$/;

export class Sessions {
  constructor(readonly settings: SessionSettings) {}

  /**
   * Makes a session for a person who was just signed in, and sets its cookie on `res`. Returns the
   * stored row (its csrfToken is what the page sends back in X-CSRF-Token).
   */
  async create(res: Response, input: NewSession): Promise<StoredSession> {
    const id = randomToken();
    const now = this.settings.now();
    const session: StoredSession = {
      idHash: digest(id),
      tenantId: input.tenantId,
      person: input.person,
      roles: [...input.roles],
      csrfToken: randomToken(),
      data: input.data ?? {},
      createdAt: now,
      lastSeenAt: now,
      expiresAt: now + this.settings.maxMs,
    };
    await this.settings.store.createSession(session);
    res.append('Set-Cookie', this.cookie(id, Math.floor(this.settings.maxMs / 1000)));
    return session;
  }

  /**
   * The live session a request's cookie names, or null (no cookie, unknown, ended). An ended one
   * is deleted. The idle clock moves on (at most once a minute). A store outage throws
   * StoreUnavailableError (answered 503 by the error handler).
   */
  async read(req: Request): Promise<ActiveSession | null> {
    const id = cookieOf(req, SESSION_COOKIE);
    if (!id || !SESSION_ID.test(id)) return null;
    const idHash = digest(id);
    const session = await this.settings.store.getSession(idHash);
    if (!session) return null;
    const now = this.settings.now();
    const { idleMs } = this.settings;
    if (now >= session.expiresAt || now >= session.lastSeenAt + idleMs) {
      await this.settings.store.deleteSession(idHash);
      return null;
    }
    if (now - session.lastSeenAt >= Math.min(TOUCH_EVERY_MS, idleMs / 10)) {
      await this.settings.store.touchSession(idHash, now);
      session.lastSeenAt = now;
    }
    return { ...session, endsAt: Math.min(session.expiresAt, session.lastSeenAt + idleMs) };
  }

  /** Replaces the server-side data of a live session (34b: an EHR token refreshed). */
  async updateData(session: StoredSession, data: Record<string, unknown>): Promise<void> {
    await this.settings.store.updateSessionData(session.idHash, data);
  }

  /** Ends the request's session, if any, and clears the cookie; returns the ended session. */
  async end(req: Request, res: Response): Promise<StoredSession | null> {
    res.append('Set-Cookie', this.cookie('', 0));
    const id = cookieOf(req, SESSION_COOKIE);
    if (!id || !SESSION_ID.test(id)) return null;
    return this.settings.store.deleteSession(digest(id));
  }

  /**
   * Keeps a sign-in under way and returns its `state` (256 random bits; the store keeps only its
   * hash). `kind` names the flow (`oidc`, `smart`): takeLogin hands it back only to that flow.
   */
  async startLogin(tenantId: string, kind: string, data: Record<string, unknown>): Promise<string> {
    const state = randomToken();
    const now = this.settings.now();
    await this.settings.store.savePendingLogin(
      { stateHash: digest(state), tenantId, kind, data, expiresAt: now + PENDING_LOGIN_MS },
      now,
    );
    return state;
  }

  /** The pending sign-in of a `state`, taken once (a replay finds nothing), or null. */
  async takeLogin(state: string, kind: string): Promise<PendingLogin | null> {
    if (!/^[A-Za-z0-9_-]{16,128}$/.test(state)) return null;
    const pending = await this.settings.store.takePendingLogin(digest(state), this.settings.now());
    return pending && pending.kind === kind ? pending : null;
  }

  private cookie(value: string, maxAgeSeconds: number): string {
    const parts = [
      `${SESSION_COOKIE}=${value}`,
      'Path=/',
      'HttpOnly',
      'SameSite=Lax',
      `Max-Age=${maxAgeSeconds}`,
    ];
    if (this.settings.secure) parts.push('Secure');
    return parts.join('; ');
  }
}

/** A person may do what the page does for a front desk: check, read, estimate, appointments. */
const PERSON_SCOPES: Scope[] = [
  'system/CoverageEligibilityRequest.crs',
  'system/CoverageEligibilityResponse.rs',
].flatMap((text) => parseScope(text) ?? []);

/** Whether a principal may use the operator actions: an API key may; a person needs an operator role. */
export function isOperator(principal: Principal): boolean {
  if (principal.kind !== 'person') return true;
  const operatorRoles = principal.tenant.oidc?.operatorRoles ?? [];
  return (principal.roles ?? []).some((role) => operatorRoles.includes(role));
}

/** 403 unless the principal may use the operator actions (guard reset, stuck checks, queues). */
export const requireOperator: RequestHandler = (_req, res, next) => {
  const principal = res.locals.principal as Principal | undefined;
  if (principal && isOperator(principal)) {
    next();
    return;
  }
  res.locals.auditNote = 'not an operator';
  next(new OperationOutcomeError(outcome('forbidden', 'Only an operator may do this'), 403));
};

/** Whether a session's CSRF token equals the header's, in constant time. */
function csrfMatches(session: StoredSession, given: string | undefined): boolean {
  if (!given) return false;
  const a = Buffer.from(session.csrfToken);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * /app/api with a session: the cookie's session sets res.locals.principal (kind `person`),
 * res.locals.tenant and res.locals.session; a non-GET call must carry X-CSRF-Token equal to the
 * session's token, else 403. No live session: the request goes on without a principal (the API
 * key sign-in comes next, see appAuthenticate in app-page.ts).
 */
export function sessionAuth(sessions: Sessions, tenants: readonly Tenant[]): RequestHandler {
  const byId = new Map(tenants.map((t) => [t.id, t]));
  return (req, res, next) => {
    if (!cookieOf(req, SESSION_COOKIE)) {
      next();
      return;
    }
    sessions.read(req).then((session) => {
      const tenant = session ? byId.get(session.tenantId) : undefined;
      if (!session || !tenant) {
        res.locals.sessionEnded = true;
        next();
        return;
      }
      res.locals.session = session;
      res.locals.tenant = tenant;
      const principal: Principal = {
        tenant,
        kind: 'person',
        id: session.person.subject,
        scopes: PERSON_SCOPES,
        person: session.person,
        roles: session.roles,
      };
      res.locals.principal = principal;
      if (!SAFE_METHODS.has(req.method) && !csrfMatches(session, req.header('x-csrf-token'))) {
        res.locals.auditNote = 'CSRF token missing or wrong';
        next(
          new OperationOutcomeError(
            outcome('forbidden', 'The X-CSRF-Token header is missing or does not match the session'),
            403,
          ),
        );
        return;
      }
      next();
    }, next);
  };
}
