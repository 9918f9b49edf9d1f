/**
 * The elements this service's narratives may hold: FHIR's basic XHTML (txt-1,
 * https://hl7.org/fhir/R4/narrative.html) as far as src/mapping/response/narrative.ts and
 * visit-summary.ts write it. One list for the Node test (test/unit/narrative.test.ts) and the
 * Chromium one (test/browser/app.test.ts), so a new element is allowed in both at once.
 */
const TEXT = ['div', 'p', 'b', 'h2', 'h3', 'ul', 'li', 'a'];
const TABLE = ['table', 'thead', 'tbody', 'tr', 'th', 'td'];

export const NARRATIVE_ELEMENTS: readonly string[] = [...TEXT, ...TABLE];
