/**
 * The walk of bindings.ts finds a property's element from a table built once per element path
 * (`findElement`); it must find exactly what the search over the definitions finds
 * (`searchElement`), for every element path the walk can be at and every property name, known or
 * not: a table entry that differed would change a shape or binding issue without any test of a
 * body noticing.
 */
import type { ElementDefinition } from 'fhir/r4.js';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { findElement, searchElement } from '../../src/fhir/bindings.js';
import { loadedDefinitions } from '../../src/fhir/definitions.js';

/** Every element path the walk can be at (types and their backbone elements), with the type's elements. */
function elementPaths(): [Map<string, ElementDefinition>, string][] {
  const out: [Map<string, ElementDefinition>, string][] = [];
  for (const [type, elements] of loadedDefinitions().elements) {
    out.push([elements, type]);
    for (const path of elements.keys()) if (path !== type) out.push([elements, path]);
  }
  return out;
}

/** The names a property may have under `elementPath`: children, their choice types, and odd ones. */
function namesUnder(elements: Map<string, ElementDefinition>, elementPath: string): string[] {
  const names = new Set(['', '_', '__proto__', 'constructor', 'toString', 'resourceType', 'extension.url']);
  for (const [path, element] of elements) {
    if (!path.startsWith(`${elementPath}.`)) continue;
    const rest = path.slice(elementPath.length + 1);
    names.add(rest); // a dotted rest names a grandchild: found directly, as the search always did
    names.add(`${rest}x`);
    names.add(rest.toUpperCase());
    if (rest.endsWith('[x]')) {
      const base = rest.slice(0, -3);
      names.add(base);
      names.add(`${base}Bogus`);
      for (const t of element.type ?? []) {
        names.add(base + t.code.charAt(0).toUpperCase() + t.code.slice(1));
        names.add(base + t.code); // lower case: no type
      }
    }
  }
  return [...names];
}

describe('findElement (table) against searchElement (the search over the definitions)', () => {
  it('agrees for every element path and every child, choice and odd property name', () => {
    let compared = 0;
    for (const [elements, elementPath] of elementPaths()) {
      for (const name of namesUnder(elements, elementPath)) {
        // Twice: the first call builds the table, the second reads it.
        expect(findElement(elements, elementPath, name)).toEqual(searchElement(elements, elementPath, name));
        expect(findElement(elements, elementPath, name)).toEqual(searchElement(elements, elementPath, name));
        compared += 1;
      }
    }
    expect(compared).toBeGreaterThan(20_000);
  });

  it('agrees for arbitrary names under the paths of a $submit body', () => {
    const { elements } = loadedDefinitions();
    const paths = [
      'CoverageEligibilityRequest',
      'CoverageEligibilityRequest.item',
      'Patient',
      'Extension',
      'Element',
    ];
    fc.assert(
      fc.property(fc.constantFrom(...paths), fc.string({ maxLength: 20 }), (path, name) => {
        const byType = elements.get(path.split('.')[0] ?? path)!;
        expect(findElement(byType, path, name)).toEqual(searchElement(byType, path, name));
      }),
      { numRuns: 5_000 },
    );
  });
});
