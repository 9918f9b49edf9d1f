/**
 * Narrative XHTML as FHIR R4 allows it (https://hl7.org/fhir/R4/narrative.html#xhtml): a `div` in
 * the XHTML namespace, only the basic formatting elements (txt-1), some non-whitespace content
 * (txt-2), and only the XML entities (`&amp;`, `&lt;`, `&gt;`, `&quot;`, `&#39;`): named HTML
 * entities such as `&nbsp;` are not allowed. Shared by every generated narrative of the service.
 */
import type { Narrative } from 'fhir/r4.js';

const XML_ESCAPES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

const XML_SPECIAL = /[&<>"']/;
const XML_SPECIALS = /[&<>"']/g;

/** Text as XML character data or an attribute value: the five XML specials escaped, nothing else. */
export function escapeXml(text: string): string {
  // Most text has none of them: tested first, replaced only when needed; an empty cell (a third
  // of a benefits table's) is not tested at all.
  if (text.length === 0 || !XML_SPECIAL.test(text)) return text;
  return text.replace(XML_SPECIALS, (c) => XML_ESCAPES[c] ?? c);
}

/**
 * A narrative of status `generated` (entirely generated from the resource's structured data)
 * around XHTML content the caller built with escapeXml: the content must not be empty.
 */
export function generatedNarrative(xhtml: string): Narrative {
  return { status: 'generated', div: `<div xmlns="http://www.w3.org/1999/xhtml">${xhtml}</div>` };
}
