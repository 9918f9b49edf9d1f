/**
 * The durations seen per payer (adaptive polling, docs/polling.md), on both stores: a running
 * log-normal fit per payer and phase, shared by every store opened on the same database (replicas)
 * and kept when the store is closed and opened again (a restart).
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/checks/store/open.js';
import type { CheckStore } from '../../src/checks/store/check-store.js';
import { quantile } from '../../src/checks/poll-schedule.js';
import { testDatabaseUrl } from '../support/postgres.js';

const PG_URL = testDatabaseUrl();
const dir = mkdtempSync(join(tmpdir(), 'payer-durations-'));
const schema = `payer_durations_${process.pid}_${Date.now()}`;

const backends = [
  {
    name: 'sqlite',
    location: `sqlite:${join(dir, `${randomUUID()}.db`)}`,
    open: (l: string) => openStore(l),
  },
  { name: 'postgres', location: schema, open: (l: string) => openStore(PG_URL, { schema: l }) },
];

afterAll(async () => {
  rmSync(dir, { recursive: true, force: true });
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
});

describe.each(backends)('payer durations on $name', (backend) => {
  const stores: CheckStore[] = [];
  async function open(): Promise<CheckStore> {
    const store = await backend.open(backend.location);
    await store.migrate();
    stores.push(store);
    return store;
  }
  afterAll(async () => {
    for (const store of stores) await store.close();
  });

  it('fits the log of the durations, per payer and phase, shared by replicas and kept across restarts', async () => {
    const a = await open();
    const b = await open(); // a second replica on the same database
    expect(await a.getPayerDurations('DAMAN')).toBeNull();
    const pre = [20_000, 24_000, 30_000, 26_000];
    // Replicas add at once: nothing is lost.
    await Promise.all(
      pre.map((ms, i) =>
        (i % 2 === 0 ? a : b).recordPayerDurations('daman ', { preExtractMs: ms, extractMs: null }, i),
      ),
    );
    await b.recordPayerDurations('DAMAN', { preExtractMs: null, extractMs: 5000 }, 10);
    await a.recordPayerDurations('AXA', { preExtractMs: 60_000, extractMs: 9000 }, 11);

    const logs = pre.map(Math.log);
    const mean = logs.reduce((s, x) => s + x, 0) / logs.length;
    const variance = logs.reduce((s, x) => s + (x - mean) ** 2, 0) / logs.length;
    const seen = await a.getPayerDurations('Daman');
    expect(seen?.preExtract?.n).toBe(4);
    expect(seen?.preExtract?.meanLog).toBeCloseTo(mean, 9);
    expect(seen?.preExtract?.varLog).toBeCloseTo(variance, 9);
    expect(seen?.extract).toEqual({ n: 1, meanLog: Math.log(5000), varLog: 0 });
    expect(quantile(seen!.extract!, 0.5)).toBeCloseTo(5000, 6);
    expect((await b.getPayerDurations('AXA'))?.preExtract?.meanLog).toBeCloseTo(Math.log(60_000), 9);

    await a.close();
    await b.close();
    stores.length = 0;
    const restarted = await open();
    expect(await restarted.getPayerDurations('DAMAN')).toEqual(seen);
  });

  it('follows recent tasks once a payer has many: a slower portal moves the fit', async () => {
    const store = await open();
    for (let i = 0; i < 60; i += 1)
      await store.recordPayerDurations('NAS', { preExtractMs: 10_000, extractMs: null }, i);
    for (let i = 0; i < 60; i += 1)
      await store.recordPayerDurations('NAS', { preExtractMs: 40_000, extractMs: null }, 100 + i);
    const fit = (await store.getPayerDurations('NAS'))!.preExtract!;
    expect(fit.n).toBe(120);
    // A plain mean of the first 50, then each task weighs 1/50: the old tasks keep 0.98^60 of the
    // weight (a plain mean of all 120 would sit at 20 s, the geometric middle).
    const expected = Math.log(40_000) + 0.98 ** 60 * (Math.log(10_000) - Math.log(40_000));
    expect(fit.meanLog).toBeCloseTo(expected, 9);
    expect(Math.exp(fit.meanLog)).toBeGreaterThan(25_000);
  });
});
