/**
 * Which outside addresses a request may go to: the one rule every reader of an EHR (the CDS
 * prefetch, the schedule) and the subscription delivery share, so none of them writes it again.
 */

/** An encoded slash or backslash, or a path segment that is a dot segment once decoded. */
const ENCODED_TRAVERSAL = /%2f|%5c|(^|\/)(\.|%2e){1,2}(\/|$)/i;

/**
 * Whether the endpoint is under one of the tenant's prefixes: same scheme, host and port, and the
 * path starts with the prefix's path at a segment boundary (compared as parsed URLs, so
 * `https://ehr.example.org` does not admit `https://ehr.example.org.evil.test/`, and
 * `https://h/hooks` admits `https://h/hooks/x` but not `https://h/hooksevil`); no credentials in
 * the URL, and no encoded slash, backslash or dot segment in its path (which a server behind the
 * endpoint could decode into a path outside the prefix).
 */
export function endpointAllowed(endpoint: string, prefixes: readonly string[]): boolean {
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    return false;
  }
  if (!/^https?:$/.test(url.protocol) || url.username || url.password) return false;
  if (ENCODED_TRAVERSAL.test(url.pathname)) return false;
  return prefixes.some((prefix) => {
    const allowed = new URL(prefix);
    if (allowed.origin !== url.origin || !url.href.startsWith(allowed.href)) return false;
    if (allowed.pathname.endsWith('/')) return url.pathname.startsWith(allowed.pathname);
    const rest = url.pathname.slice(allowed.pathname.length);
    return url.pathname.startsWith(allowed.pathname) && (rest === '' || rest.startsWith('/'));
  });
}
