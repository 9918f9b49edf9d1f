/**
 * contentTypeOf (src/mapping/response/binary.ts) skips the URL parser for a name without ':'; held
 * here against its definition (the path of the name when it parses as a URL, else the name).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CONTENT_TYPES as TYPES, contentTypeOf } from '../../src/mapping/response/binary.js';

/** The definition: always try the parser. */
function byDefinition(name: string): string | undefined {
  if (!name) return undefined;
  let path = name;
  try {
    path = new URL(name).pathname;
  } catch {
    // a plain file name
  }
  const extension = /\.([A-Za-z0-9]+)$/.exec(path)?.[1]?.toLowerCase();
  return extension ? TYPES[extension] : undefined;
}

const piece = fc.constantFrom(
  'http',
  'https',
  'file',
  'blob',
  'C',
  ':',
  '//',
  '/',
  '\\',
  'host',
  '.pdf',
  '.PNG',
  '.jpeg',
  '?',
  '#',
  '%2e',
  ' ',
  '\t',
  '\n',
  '\u0000',
  '\uFF1A',
  'a b',
  '..',
  '[',
  '@',
);

describe('contentTypeOf', () => {
  it('answers as the URL parser would, for names with and without a scheme', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.array(piece, { maxLength: 8 }).map((p) => p.join('')),
          fc.string(),
        ),
        (name) => {
          expect(contentTypeOf(name)).toBe(byDefinition(name));
        },
      ),
      { numRuns: 20000 },
    );
  });
});
