/**
 * FreshResults (src/operations/binary.ts): one upstream read about a task serves every document
 * of it for a few seconds, a failed read included, so opening documents never becomes a burst of
 * requests about one task while the upstream fails.
 */
import { describe, expect, it } from 'vitest';
import { FreshResults } from '../../src/operations/binary.js';
import type { Tenant } from '../../src/config.js';
import type { UpstreamPort } from '../../src/upstream/port.js';

const TENANT = {
  id: 'clinic-a',
  upstream: { apiKey: 'k', clinicId: 'c', clientId: 'e' },
} as unknown as Tenant;

function upstreamAnswering(ok: boolean): { port: UpstreamPort; reads: () => number } {
  let reads = 0;
  const port = {
    getResult: () => {
      reads += 1;
      return Promise.resolve(
        ok
          ? { ok: true as const, value: { status: 'PROCESS_COMPLETE' } }
          : { ok: false as const, error: { kind: 'http' as const, status: 502 } },
      );
    },
  } as unknown as UpstreamPort;
  return { port, reads: () => reads };
}

describe('FreshResults', () => {
  it.each([
    ['a good read', true],
    ['a failed read', false],
  ])('%s serves the same task for the freshness window, then a new read goes out', async (_name, ok) => {
    let clock = 1_000_000;
    const upstream = upstreamAnswering(ok);
    const fresh = new FreshResults(upstream.port, 3000, () => clock);
    for (let i = 0; i < 5; i += 1) await fresh.get(TENANT, 'task-1');
    expect(upstream.reads()).toBe(1);
    clock += 2999;
    await fresh.get(TENANT, 'task-1');
    expect(upstream.reads()).toBe(1);
    clock += 1;
    await fresh.get(TENANT, 'task-1');
    expect(upstream.reads()).toBe(2);
    // Another task is another read.
    await fresh.get(TENANT, 'task-2');
    expect(upstream.reads()).toBe(3);
  });
});
