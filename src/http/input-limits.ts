/**
 * Limits on a request body, checked before any FHIR work (docs/input-limits.md):
 *   1. size, by the body parser (413);
 *   2. JSON nesting depth, by a scan of the raw bytes before JSON.parse (400);
 *   3. array lengths, string lengths and property names, by one pass over the parsed value (400).
 * Each is far above what a real request needs and low enough that everything after it (the FHIR
 * validator, the mapper, the error answer) does bounded work.
 */
import type { OperationOutcomeIssue } from 'fhir/r4.js';
import { OperationOutcomeError, outcomeOf } from '../fhir/outcomes.js';
import { hasLoneSurrogate } from '../fhir/text.js';

export const INPUT_LIMITS = {
  /** Bytes of one request body: a $submit is a few KB; a rich Bundle with narratives well under 100 KB. */
  bodyBytes: 1024 * 1024,
  /**
   * Bytes of a batch (POST /fhir, docs/batch-and-reuse.md): up to 500 $submit entries of 16 KB.
   * Only the body limit differs: a batch's entry array (500) is inside arrayItems, its nesting
   * one Bundle deeper than a $submit's.
   */
  batchBodyBytes: 8 * 1024 * 1024,
  /** Nesting of objects and arrays. A Parameters > Bundle > request > contained > extension > coding chain is about 16. */
  depth: 32,
  /** Items of one array. */
  arrayItems: 1000,
  /** Characters of one string value (FHIR allows 1 MB; nothing the adapter reads is near 64 K). */
  stringChars: 64 * 1024,
  /** Characters of one property name. FHIR element names are short identifiers. */
  propertyNameChars: 64,
} as const;

/** A FHIR JSON property name: an element name, or `_` and one for a primitive's extensions (https://hl7.org/fhir/R4/json.html). */
const PROPERTY_NAME = new RegExp(`^(?=.{1,${INPUT_LIMITS.propertyNameChars}}$)_?[A-Za-z][A-Za-z0-9]*$`);

const OPEN_OBJECT = 0x7b; // {
const OPEN_ARRAY = 0x5b; // [
const CLOSE_OBJECT = 0x7d; // }
const CLOSE_ARRAY = 0x5d; // ]
const QUOTE = 0x22; // "
const BACKSLASH = 0x5c; // \

/** An error for the body parser's verify hook; its `type` is read by the error handler. */
export class BodyTooDeepError extends Error {
  readonly type = 'entity.too.deep';
  constructor() {
    super(`The JSON is nested more than ${INPUT_LIMITS.depth} levels deep`);
  }
}

/**
 * Throws BodyTooDeepError when the raw JSON nests deeper than the limit. One pass over the bytes,
 * outside strings; malformed JSON is left to JSON.parse.
 */
export function checkRawDepth(raw: Buffer, limit: number = INPUT_LIMITS.depth): void {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < raw.length; i += 1) {
    const byte = raw[i];
    if (inString) {
      if (byte === BACKSLASH) i += 1;
      else if (byte === QUOTE) inString = false;
    } else if (byte === QUOTE) inString = true;
    else if (byte === OPEN_OBJECT || byte === OPEN_ARRAY) {
      depth += 1;
      if (depth > limit) throw new BodyTooDeepError();
    } else if (byte === CLOSE_OBJECT || byte === CLOSE_ARRAY) depth -= 1;
  }
}

/** Room for a few issues of each kind: the answer names the first ones (the outcome is bounded anyway). */
const MAX_ISSUES = 20;

/**
 * Checks array lengths, string lengths and property names of a parsed body; throws a 400
 * OperationOutcomeError naming each offending element by its FHIRPath (never repeating its value).
 * Iterative, so it cannot overflow the stack; the depth is already bounded by checkRawDepth.
 */
export function checkParsedLimits(body: unknown): void {
  const rootType = (body as { resourceType?: unknown } | null)?.resourceType;
  const root = typeof rootType === 'string' && /^[A-Z][A-Za-z]{0,63}$/.test(rootType) ? rootType : '$this';
  const issues: OperationOutcomeIssue[] = [];
  const stack: [unknown, string][] = [[body, root]];
  while (stack.length > 0 && issues.length < MAX_ISSUES) {
    const [value, path] = stack.pop() as [unknown, string];
    if (typeof value === 'string') {
      if (value.length > INPUT_LIMITS.stringChars)
        issues.push(tooCostly(`A string is longer than ${INPUT_LIMITS.stringChars} characters`, path));
      // JSON can carry half of a surrogate pair as an escape (\ud800); that is no Unicode text,
      // and a FHIR string is Unicode text (https://hl7.org/fhir/R4/datatypes.html#string).
      else if (hasLoneSurrogate(value))
        issues.push({
          severity: 'error',
          code: 'structure',
          details: { text: 'A string holds half of a surrogate pair: it is not Unicode text' },
          expression: [path],
        });
    } else if (Array.isArray(value)) {
      if (value.length > INPUT_LIMITS.arrayItems) {
        issues.push(tooCostly(`An array has more than ${INPUT_LIMITS.arrayItems} items`, path));
        continue;
      }
      for (let i = value.length - 1; i >= 0; i -= 1) stack.push([value[i], `${path}[${i}]`]);
    } else if (typeof value === 'object' && value !== null) {
      const keys = Object.keys(value);
      const bad = keys.find((key) => !PROPERTY_NAME.test(key));
      if (bad !== undefined) {
        issues.push({
          severity: 'error',
          code: 'structure',
          details: { text: 'A property name is not a FHIR element name (letters and digits, at most 64)' },
          expression: [path],
        });
        continue;
      }
      for (let i = keys.length - 1; i >= 0; i -= 1) {
        const key = keys[i] as string;
        stack.push([(value as Record<string, unknown>)[key], `${path}.${key}`]);
      }
    }
  }
  if (issues.length > 0) throw new OperationOutcomeError(outcomeOf(issues), 400);
}

function tooCostly(text: string, path: string): OperationOutcomeIssue {
  return { severity: 'error', code: 'too-costly', details: { text }, expression: [path] };
}
