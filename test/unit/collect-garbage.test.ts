/**
 * collectGarbage (src/server.ts), run once the FHIR definitions are loaded: a full collection,
 * with no --expose-gc on the command line. If a Node upgrade stopped handing `gc` to a new
 * context, the garbage of the load would stay and this test fails.
 */
import { getHeapStatistics } from 'node:v8';
import { describe, expect, it } from 'vitest';
import { collectGarbage } from '../../src/server.js';

describe('collectGarbage', () => {
  it('frees garbage that only a full collection frees', () => {
    // Large arrays live in V8's large-object space, which only a full (mark-compact) collection
    // empties: a young-generation scavenge between the lines below would not free them.
    let junk: number[][] | null = Array.from({ length: 64 }, () => new Array<number>(131_072).fill(1.5));
    const held = getHeapStatistics().used_heap_size;
    expect(junk.length).toBe(64);
    junk = null;
    collectGarbage();
    const after = getHeapStatistics().used_heap_size;
    // 64 x 131,072 doubles = 64 MB held; at least half of it must be gone.
    expect(held - after).toBeGreaterThan(32 * 1024 * 1024);
  });
});
