/**
 * Text that is safe to put in a FHIR `string`, and short echoes of client input.
 *
 * A FHIR string holds Unicode text with no control characters other than CR, LF and TAB, and
 * has non-whitespace content (https://hl7.org/fhir/R4/datatypes.html#string, regex
 * `[ \r\n\t\S]+`). Anything copied from a request or from the upstream into an answer goes
 * through `fhirString` first, so an answer is valid FHIR whatever the input was.
 */

/** Code units a FHIR string may not hold: C0 controls other than TAB, LF, CR. */
const NOT_FHIR_STRING = /[^\r\n\t\u0020-\uFFFF]/;
const NOT_FHIR_STRING_ALL = /[^\r\n\t\u0020-\uFFFF]/g;
/** A surrogate without its pair: not Unicode text (JSON can carry one as an escape). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const LONE_SURROGATE_ALL = new RegExp(LONE_SURROGATE.source, 'g');

/** True when the text holds half of a surrogate pair alone: it is not Unicode text. */
export function hasLoneSurrogate(text: string): boolean {
  return LONE_SURROGATE.test(text);
}

/**
 * The FHIR-string form of a text: lone surrogates replaced (U+FFFD), control characters removed,
 * outer white space trimmed. Undefined when nothing is left.
 */
export function fhirString(raw: string): string | undefined {
  // Most text is clean: each repair runs only when its test finds something to repair.
  let text = LONE_SURROGATE.test(raw) ? raw.replace(LONE_SURROGATE_ALL, '\uFFFD') : raw;
  if (NOT_FHIR_STRING.test(text)) text = text.replace(NOT_FHIR_STRING_ALL, '');
  text = text.trim();
  return text === '' ? undefined : text;
}

/** How much of a client's value an error message repeats. */
export const ECHO_CHARS = 40;

/**
 * A client's value as an error message may repeat it: cut to a short prefix, made a FHIR string,
 * quoted. Never pass an identifier value (an Emirates ID or card number is patient data): name
 * the element by its expression instead.
 */
export function echo(value: string): string {
  return JSON.stringify(fhirString(truncate(value, ECHO_CHARS)) ?? '');
}

/** A text cut to at most `max` UTF-16 units, with an ellipsis when cut (a cut pair is repaired by fhirString). */
export function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}
