/**
 * Calls to this service, signed in one of two ways (docs/signin.md):
 * - a person's session (a clinic whose people sign in with their clinic account): the
 *   HttpOnly cookie the service set, and the session's CSRF token in X-CSRF-Token on every call
 *   that changes something; the FHIR calls go to /app/api/fhir/ (the cookie never opens /fhir);
 * - the tenant's key as a Bearer token, kept in sessionStorage (this tab only, gone when it
 *   closes) and only ever in the Authorization header: never in a URL, a log or the page.
 */
const KEY = 'fea.apiKey';

export const session = {
  get key() {
    return sessionStorage.getItem(KEY);
  },
  set key(value) {
    if (value) sessionStorage.setItem(KEY, value);
    else sessionStorage.removeItem(KEY);
  },
  /** The person's session (from /app/api/session), or null: { name, roles, tenant, csrfToken, operator }. */
  person: null,
};

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** The first issue text of an OperationOutcome, or a generic line. */
export function outcomeText(body, status) {
  const issue = body && body.resourceType === 'OperationOutcome' ? body.issue?.[0] : undefined;
  return issue?.details?.text ?? issue?.diagnostics ?? `The service answered ${status}`;
}

/** With a person's session, the FHIR API is the page's copy under /app/api/fhir/. */
function routed(path) {
  return session.person && path.startsWith('/fhir/') ? `/app/api${path}` : path;
}

/** The headers and credentials of a call, for the way the page is signed in. */
function credentialsOf(method, key) {
  if (session.person) {
    return {
      headers: method === 'GET' || method === 'HEAD' ? {} : { 'X-CSRF-Token': session.person.csrfToken },
      credentials: 'same-origin',
    };
  }
  return { headers: key ? { Authorization: `Bearer ${key}` } : {}, credentials: 'omit' };
}

/** A same-origin request; `path` is a path on this service, never an absolute URL. */
export async function call(path, { method = 'GET', body, headers = {}, key = session.key } = {}) {
  if (!path.startsWith('/')) throw new Error('only paths on this service');
  const auth = credentialsOf(method, key);
  const response = await fetch(routed(path), {
    method,
    headers: {
      Accept: 'application/fhir+json, application/json',
      ...auth.headers,
      ...(body ? { 'Content-Type': 'application/fhir+json' } : {}),
      ...headers,
    },
    body: body ? JSON.stringify(body) : undefined,
    cache: 'no-store',
    credentials: auth.credentials,
    referrerPolicy: 'no-referrer',
  });
  const type = response.headers.get('content-type') ?? '';
  const json =
    response.status !== 204 && response.status !== 304 && type.includes('json')
      ? await response.json()
      : null;
  return { status: response.status, headers: response.headers, json };
}

/** A GET of raw bytes (a document), signed in as the page is. */
export function fetchRaw(path) {
  const auth = credentialsOf('GET', session.key);
  return fetch(routed(path), { headers: auth.headers, credentials: auth.credentials, cache: 'no-store' });
}

/** The path of a URL this service gave (Location, attachment url): same origin, whatever its base. */
export function pathOf(url) {
  const parsed = new URL(url, window.location.origin);
  return `${parsed.pathname}${parsed.search}`;
}

/** The person's session, if the browser has one: 200 with it, else null. */
export async function readSession() {
  const response = await fetch('/app/api/session', {
    headers: { Accept: 'application/json' },
    credentials: 'same-origin',
    cache: 'no-store',
  });
  return response.status === 200 ? response.json() : null;
}

/** Ends the person's session and goes where the service says (the clinic's sign-out page, or back here). */
export async function endSession() {
  const person = session.person;
  session.person = null;
  const response = await fetch('/app/logout', {
    method: 'POST',
    headers: { Accept: 'application/json', ...(person ? { 'X-CSRF-Token': person.csrfToken } : {}) },
    credentials: 'same-origin',
    cache: 'no-store',
  });
  const answer = response.ok ? await response.json() : null;
  window.location.assign(answer?.redirect ?? '/app/');
}
