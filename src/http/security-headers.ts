/**
 * The security headers of every answer (helmet: a CSP of `default-src 'none'`, nosniff, HSTS,
 * frame and referrer policies, ...). With this configuration they do not depend on the request,
 * so helmet runs once, at start-up, against a recorder, and every answer gets the recorded list:
 * the app's middleware and the CER read lane (src/http/cer-read-lane.ts) set them from this one
 * place, so the two cannot drift apart. (Setting a recorded list is not cheaper than helmet
 * itself, bench/README.md; sharing it is the point.) A directive computed per request (a CSP
 * nonce, say) would be frozen by the recording: such a configuration must not be made here.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RequestHandler } from 'express';
import helmet from 'helmet';

const HELMET = helmet({ contentSecurityPolicy: { directives: { defaultSrc: ["'none'"] } } });

/** Runs helmet once and keeps the headers it set (a header it removed is not set by us either). */
function recordHelmet(): ReadonlyArray<readonly [string, string]> {
  const headers = new Map<string, readonly [string, string]>();
  const recorder = {
    setHeader(name: string, value: unknown) {
      headers.set(name.toLowerCase(), [name, String(value)]);
      return recorder;
    },
    removeHeader(name: string) {
      headers.delete(name.toLowerCase());
    },
    getHeader(name: string) {
      return headers.get(name.toLowerCase())?.[1];
    },
  };
  let failed: unknown;
  HELMET({ headers: {} } as IncomingMessage, recorder as unknown as ServerResponse, (error?: unknown) => {
    failed = error;
  });
  if (failed !== undefined) throw new Error('helmet refused its own configuration');
  return [...headers.values()];
}

/** [name, value] of each security header, in helmet's order. */
export const SECURITY_HEADERS = recordHelmet();

/** The same list as node's raw header array (writeHead): name, value, name, value, ... */
export const SECURITY_HEADER_LIST: readonly string[] = SECURITY_HEADERS.flat();

/** Sets the security headers on an answer. */
export const securityHeaders: RequestHandler = (_req, res, next) => {
  for (const [name, value] of SECURITY_HEADERS) res.setHeader(name, value);
  next();
};
