/**
 * RFC 7240 Prefer header: `respond-async` (FHIR async pattern), `wait=N` (seconds) and
 * `handling=strict|lenient` (search).
 * https://www.rfc-editor.org/rfc/rfc7240 and https://hl7.org/fhir/R4/async.html
 */
export interface Preferences {
  respondAsync: boolean;
  /** Seconds the client is willing to wait, when given. */
  waitSeconds?: number;
  /** `handling=strict` or `handling=lenient` (https://hl7.org/fhir/R4/search.html#errors). */
  handling?: 'strict' | 'lenient';
}

/** Parses a Prefer header value. Unknown or malformed preferences are ignored, as RFC 7240 section 2 asks. */
export function parsePrefer(header: string | undefined): Preferences {
  const prefs: Preferences = { respondAsync: false };
  if (!header) return prefs;
  for (const part of header.split(',')) {
    const [token = '', value] = part
      .split(';')[0]!
      .split('=')
      .map((s) => s.trim().replace(/^"|"$/g, ''));
    const name = token.toLowerCase();
    if (name === 'respond-async') prefs.respondAsync = true;
    if (name === 'handling' && (value === 'strict' || value === 'lenient')) prefs.handling = value;
    if (name === 'wait' && value !== undefined && /^\d{1,6}$/.test(value)) prefs.waitSeconds = Number(value);
  }
  return prefs;
}
