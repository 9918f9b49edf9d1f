/** Text in FHIR XHTML: the ground floor's escapeXml (src/fhir/xhtml.ts), for the narrative and the visit summary. */
export { escapeXml } from '../../fhir/xhtml.js';
