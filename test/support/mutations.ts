/**
 * Seeded mutations of valid $submit bodies, for the HTTP-level property test
 * (test/component/fuzz.test.ts) and the long run (`npm run fuzz`, bench/fuzz.ts).
 *
 * A case is a valid body (a contained request, a collection Bundle, Parameters) with one to four
 * mutations: fields dropped or retyped, huge strings and arrays, deep nesting, hostile unicode,
 * prototype keys, and at the byte level duplicate keys, invalid UTF-8 and cut-off JSON.
 */
import type { Bundle, CoverageEligibilityRequest, Parameters } from 'fhir/r4.js';
import fc from 'fast-check';
import { eligibilityRequest } from './requests.js';

/** One request as sent: the bytes and their content type. */
export interface FuzzCase {
  body: Buffer;
  contentType: string;
  /** What was done to the valid body, for a failure report. */
  label: string;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** The three shapes $submit accepts, each valid as it stands. */
function bases(): Record<string, Json> {
  const request = eligibilityRequest({ identifier: 'fuzz-1' });
  const { contained, ...bare } = request;
  const [patient, payer] = contained ?? [];
  const bundle: Bundle = {
    resourceType: 'Bundle',
    type: 'collection',
    entry: [
      {
        fullUrl: 'urn:uuid:5b2c8a0e-0c2d-4a53-9a4f-0f5d0c1e2a01',
        resource: {
          ...bare,
          patient: { reference: 'urn:uuid:5b2c8a0e-0c2d-4a53-9a4f-0f5d0c1e2a02' },
          insurer: { reference: 'urn:uuid:5b2c8a0e-0c2d-4a53-9a4f-0f5d0c1e2a03' },
        } as CoverageEligibilityRequest,
      },
      { fullUrl: 'urn:uuid:5b2c8a0e-0c2d-4a53-9a4f-0f5d0c1e2a02', ...(patient ? { resource: patient } : {}) },
      { fullUrl: 'urn:uuid:5b2c8a0e-0c2d-4a53-9a4f-0f5d0c1e2a03', ...(payer ? { resource: payer } : {}) },
    ],
  };
  const parameters: Parameters = {
    resourceType: 'Parameters',
    parameter: [{ name: 'resource', resource: request }],
  };
  return {
    request: request as unknown as Json,
    bundle: bundle as unknown as Json,
    parameters: parameters as unknown as Json,
  };
}

/** Strings a FHIR string may not hold, or that trip naive code. */
const NASTY_STRINGS = [
  '',
  ' ',
  '\t',
  '\u0000',
  'a\u0000b',
  '\u0007\u001b[31m',
  '\ud800',
  'x\udc00y',
  '\u2028\u2029',
  '\u202eevil',
  '\ufeff',
  '\u00a0',
  '😀👨‍👩‍👧',
  'مرحبا',
  '<script>alert(1)</script>',
  '"quoted"\\',
  '784-1990-1234567-6',
  '__proto__',
  'constructor',
  '%s%n',
  '../../etc/passwd',
];

/** A placeholder replaced after JSON.stringify by `depth` nested arrays or objects. */
const deepMarker = (depth: number, kind: 'a' | 'o') => `__DEEP_${kind}_${depth}__`;

const replacement: fc.Arbitrary<Json> = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.constantFrom(...NASTY_STRINGS),
  fc.constantFrom(1_000, 60_000, 70_000, 300_000, 1_100_000).map((n) => 'x'.repeat(n)),
  fc.integer(),
  fc.double(),
  fc.constantFrom(0, -1, 1e308, -1e308, 2 ** 53 + 1, 0.1),
  fc.boolean(),
  fc.constant(null),
  fc.constantFrom(0, 1, 10, 1001, 5000).map((n): Json => Array.from({ length: n }, () => 'x')),
  fc.array(fc.string({ maxLength: 5 }), { maxLength: 5 }),
  fc.constant({}),
  fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }), {
    maxKeys: 3,
  }) as fc.Arbitrary<Json>,
  fc
    .tuple(fc.constantFrom(5, 20, 31, 33, 100, 20_000), fc.constantFrom('a' as const, 'o' as const))
    .map(([depth, kind]) => deepMarker(depth, kind)),
);

type Mutation =
  | { op: 'drop'; at: number }
  | { op: 'retype'; at: number; value: Json }
  | { op: 'prototype'; at: number; key: string; value: Json }
  | { op: 'rename'; at: number; key: string };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ op: fc.constant('drop' as const), at: fc.nat() }),
  fc.record({ op: fc.constant('retype' as const), at: fc.nat(), value: replacement }),
  fc.record({
    op: fc.constant('prototype' as const),
    at: fc.nat(),
    key: fc.constantFrom('__proto__', 'constructor', 'prototype', 'hasOwnProperty', 'toString'),
    value: replacement,
  }),
  fc.record({
    op: fc.constant('rename' as const),
    at: fc.nat(),
    key: fc.oneof(
      fc.string({ unit: 'binary', maxLength: 12 }),
      fc.constantFrom('k'.repeat(100), '', '0', 'a b'),
    ),
  }),
);

type ByteMutation =
  | { op: 'none' }
  | { op: 'duplicate-key'; key: string; value: string }
  | { op: 'invalid-utf8'; at: number; bytes: readonly number[] }
  | { op: 'cut'; at: number }
  | { op: 'bom' };

const byteMutation: fc.Arbitrary<ByteMutation> = fc.oneof(
  { weight: 6, arbitrary: fc.constant({ op: 'none' as const }) },
  fc.record({
    op: fc.constant('duplicate-key' as const),
    key: fc.constantFrom('resourceType', 'status', 'patient', 'insurer', 'purpose', '__proto__'),
    value: fc.constantFrom('"Patient"', '"bogus"', '{}', '[]', '1', 'null', '{"reference":"#nope"}'),
  }),
  fc.record({
    op: fc.constant('invalid-utf8' as const),
    at: fc.nat(),
    bytes: fc.constantFrom(
      [0xff],
      [0xc3],
      [0xed, 0xa0, 0x80],
      [0xf4, 0x90, 0x80, 0x80],
      [0xc0, 0xaf],
      [0x00],
    ),
  }),
  fc.record({ op: fc.constant('cut' as const), at: fc.nat() }),
  fc.constant({ op: 'bom' as const }),
);

const contentType = fc.oneof(
  { weight: 12, arbitrary: fc.constant('application/fhir+json') },
  fc.constantFrom(
    'application/json',
    'application/fhir+json; charset=utf-8',
    'application/fhir+json; charset=latin1',
    'application/fhir+json; charset=utf-16',
  ),
);

/** Every [container, key] in a JSON tree, in a fixed order, so a number picks one. */
function slots(root: Json): [Record<string, Json> | Json[], string | number][] {
  const found: [Record<string, Json> | Json[], string | number][] = [];
  const stack: Json[] = [root];
  while (stack.length > 0) {
    const value = stack.pop() as Json;
    if (Array.isArray(value)) {
      value.forEach((child, index) => {
        found.push([value, index]);
        stack.push(child);
      });
    } else if (typeof value === 'object' && value !== null) {
      for (const [key, child] of Object.entries(value)) {
        found.push([value, key]);
        stack.push(child);
      }
    }
  }
  return found;
}

function setOwn(container: Record<string, Json> | Json[], key: string | number, value: Json): void {
  // defineProperty: "__proto__" becomes an own key, as JSON.parse makes it, not a prototype.
  Object.defineProperty(container, key, { value, enumerable: true, writable: true, configurable: true });
}

function applyMutation(root: Json, m: Mutation): void {
  const all = slots(root);
  const slot = all[m.at % Math.max(all.length, 1)];
  if (!slot) return;
  const [container, key] = slot;
  if (m.op === 'drop') {
    if (Array.isArray(container)) container.splice(Number(key), 1);
    else delete container[key];
  } else if (m.op === 'retype') {
    // A copy: fast-check hands out one instance of a constant, which later mutations would change.
    setOwn(container, key, structuredClone(m.value));
  } else if (m.op === 'prototype') {
    const target = container[key as never] as Json;
    const object =
      typeof target === 'object' && target !== null && !Array.isArray(target) ? target : container;
    if (!Array.isArray(object)) setOwn(object, m.key, structuredClone(m.value));
  } else if (!Array.isArray(container)) {
    const value = container[key] as Json;
    delete container[key];
    setOwn(container, m.key, value);
  }
}

function nest(depth: number, kind: 'a' | 'o'): string {
  return kind === 'a'
    ? `${'['.repeat(depth)}${']'.repeat(depth)}`
    : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}

function applyBytes(text: string, m: ByteMutation): Buffer {
  const bytes = Buffer.from(text, 'utf8');
  switch (m.op) {
    case 'none':
      return bytes;
    case 'duplicate-key': {
      const at = text.indexOf('{') + 1;
      return Buffer.from(`${text.slice(0, at)}"${m.key}":${m.value},${text.slice(at)}`, 'utf8');
    }
    case 'invalid-utf8': {
      const at = m.at % (bytes.length + 1);
      return Buffer.concat([bytes.subarray(0, at), Buffer.from(m.bytes), bytes.subarray(at)]);
    }
    case 'cut':
      return bytes.subarray(0, m.at % (bytes.length + 1));
    case 'bom':
      return Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes]);
  }
}

/** The fast-check arbitrary of a mutated $submit request. */
export function fuzzCases(): fc.Arbitrary<FuzzCase> {
  const valid = bases();
  return fc
    .record({
      base: fc.constantFrom(...Object.keys(valid)),
      mutations: fc.array(mutation, { minLength: 1, maxLength: 4 }),
      bytes: byteMutation,
      contentType,
    })
    .map(({ base, mutations, bytes, contentType: type }) => {
      const root = structuredClone(valid[base] as Json);
      for (const m of mutations) applyMutation(root, m);
      const text = JSON.stringify(root).replace(
        /"__DEEP_([ao])_(\d+)__"/g,
        (_all, kind: 'a' | 'o', depth: string) => nest(Number(depth), kind),
      );
      const ops = mutations.map((m) => m.op).join('+');
      return { body: applyBytes(text, bytes), contentType: type, label: `${base}:${ops}:${bytes.op}` };
    });
}
