/**
 * Calls to this service with the tenant's key as a Bearer token. The key lives in sessionStorage
 * (this tab only, gone when it closes) and goes only into the Authorization header: never into a
 * URL, a log or the page.
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

/** A same-origin request; `path` is a path on this service, never an absolute URL. */
export async function call(path, { method = 'GET', body, headers = {}, key = session.key } = {}) {
  if (!path.startsWith('/')) throw new Error('only paths on this service');
  const response = await fetch(path, {
    method,
    headers: {
      Accept: 'application/fhir+json, application/json',
      ...(key ? { Authorization: `Bearer ${key}` } : {}),
      ...(body ? { 'Content-Type': 'application/fhir+json' } : {}),
      ...headers,
    },
    body: body ? JSON.stringify(body) : undefined,
    cache: 'no-store',
    credentials: 'omit',
    referrerPolicy: 'no-referrer',
  });
  const type = response.headers.get('content-type') ?? '';
  const json =
    response.status !== 204 && response.status !== 304 && type.includes('json')
      ? await response.json()
      : null;
  return { status: response.status, headers: response.headers, json };
}

/** The path of a URL this service gave (Location, attachment url): same origin, whatever its base. */
export function pathOf(url) {
  const parsed = new URL(url, window.location.origin);
  return `${parsed.pathname}${parsed.search}`;
}
