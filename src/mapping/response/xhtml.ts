/**
 * Text in FHIR XHTML (https://hl7.org/fhir/R4/narrative.html#xhtml): only the XML entities
 * (`&amp;`, `&lt;`, `&gt;`, `&quot;`, `&#39;`); named HTML entities such as `&nbsp;` are not
 * allowed. Shared by the narrative and the visit summary.
 */
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
