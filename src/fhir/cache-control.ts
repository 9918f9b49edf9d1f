/**
 * The request directives of Cache-Control this service honours (RFC 9111 section 5.2.1): on
 * $submit and a batch they steer the reuse of a recent answer (docs/batch-and-reuse.md).
 * `no-cache` (also `no-store`): never a reused answer; `max-age=N`: only one at most N seconds
 * old. Other directives, and a malformed max-age, are ignored, as RFC 9111 allows.
 */
export interface CacheDirectives {
  noCache?: boolean;
  maxAgeSeconds?: number;
}

export function parseCacheControl(header: string | undefined): CacheDirectives {
  const directives: CacheDirectives = {};
  for (const part of (header ?? '').split(',')) {
    const [name = '', value] = part.trim().split('=', 2);
    const directive = name.trim().toLowerCase();
    if (directive === 'no-cache' || directive === 'no-store') directives.noCache = true;
    else if (directive === 'max-age' && value !== undefined) {
      const seconds = value.trim().replace(/^"(.*)"$/, '$1');
      // delta-seconds (RFC 9111 section 1.2.2): digits only.
      if (/^\d{1,10}$/.test(seconds)) directives.maxAgeSeconds = Number(seconds);
    }
  }
  return directives;
}
