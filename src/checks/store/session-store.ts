/**
 * Sessions of people signed in to the page (docs/signin.md) and their pending sign-ins, in the
 * check store's database so that any replica serves them and a restart keeps them. A session is
 * found by the SHA-256 of its id, never the id itself: a copy of the table opens no session.
 */

/** Who a session is: the provider's issuer and subject, the name shown, and the EHR user if any. */
export interface SessionPerson {
  /** The OpenID provider (or EHR authorization server) that signed the person in. */
  issuer: string;
  /** The ID token's `sub`. */
  subject: string;
  /** The name shown on the page and in the audit trail (`name`, else `preferred_username`, else `sub`). */
  name: string;
  /** SMART App Launch: the ID token's `fhirUser` (a reference to a Practitioner, ...), when given. */
  fhirUser?: string;
}

/** One session row. `data` is server-side only (never sent to the browser). */
export interface StoredSession {
  /** SHA-256 hex of the session id (the cookie's value). */
  idHash: string;
  tenantId: string;
  person: SessionPerson;
  roles: string[];
  /** The value every non-GET /app/api call must carry in X-CSRF-Token. */
  csrfToken: string;
  /** Anything else the sign-in keeps on the server: an ID token hint for logout, an EHR access token. */
  data: Record<string, unknown>;
  createdAt: number;
  lastSeenAt: number;
  /** The absolute end (SESSION_MAX_HOURS after sign-in). */
  expiresAt: number;
}

/** A sign-in under way, between the redirect to the provider and its callback. */
export interface PendingLogin {
  /** SHA-256 hex of the `state` sent to the provider. */
  stateHash: string;
  tenantId: string;
  /** Which flow started it (`oidc`, `smart`): a callback takes only its own. */
  kind: string;
  /** The nonce, the PKCE verifier and whatever else the callback needs. */
  data: Record<string, unknown>;
  expiresAt: number;
}

export interface SessionStore {
  createSession(session: StoredSession): Promise<void>;
  getSession(idHash: string): Promise<StoredSession | null>;
  /** Moves the idle clock on. */
  touchSession(idHash: string, lastSeenAt: number): Promise<void>;
  /** Replaces a session's server-side data. */
  updateSessionData(idHash: string, data: Record<string, unknown>): Promise<void>;
  /** Deletes a session; returns it when there was one. */
  deleteSession(idHash: string): Promise<StoredSession | null>;
  /** Deletes sessions whose absolute end or idle end passed; returns how many. */
  purgeSessions(now: number, idleMs: number): Promise<number>;
  /** Keeps a pending sign-in; expired ones (by `now`) are dropped in the same write. */
  savePendingLogin(pending: PendingLogin, now: number): Promise<void>;
  /**
   * Takes a pending sign-in once: the row is deleted as it is read (one statement), so a replayed
   * `state` finds nothing, on any replica. Expired rows are never returned.
   */
  takePendingLogin(stateHash: string, now: number): Promise<PendingLogin | null>;
}
