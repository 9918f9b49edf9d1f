/**
 * The store can fail, on SQLite (issue 29, "Done when"): the service's SQLite file on a small
 * tmpfs of this test's own, filled to ENOSPC with a junk file while checks are polled and new ones
 * submitted, then emptied. $submit answers 503 with Retry-After (not 500), /ready is 503 while
 * the store cannot be written, and afterwards every check ends with the upstream's outcome.
 * Where this machine refuses `mount`, the same drill runs with writes failed by an injected
 * SQLITE_FULL (test/support/full-disk.ts), and says so; where it allows it, both run.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import type { FullDisk, FullDiskKind } from '../support/full-disk.js';
import { canMountTmpfs, smallDisk } from '../support/full-disk.js';
import type { Drill } from '../support/outage-drill.js';
import { counter, outage, startDrill, untilTasks } from '../support/outage-drill.js';
import { expectAllEligible, expectOutageKept } from '../support/outage-expect.js';

const KINDS: FullDiskKind[] = canMountTmpfs() ? ['tmpfs', 'injected'] : ['injected'];
if (!KINDS.includes('tmpfs'))
  console.warn(
    '[store-full-disk] mount -t tmpfs is refused here: the full disk is an injected SQLITE_FULL only',
  );

const cleanups: (() => Promise<void> | void)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

describe.each(KINDS)('store outage drill on SQLite with a full disk (%s)', (kind) => {
  it('$submit answers 503 with Retry-After while the disk is full, /ready is 503, and every check ends eligible once it is emptied', async () => {
    const disk: FullDisk = smallDisk(kind);
    cleanups.push(() => disk.close());
    const drill: Drill = await startDrill({
      databaseUrl: `sqlite:${join(disk.dir, 'adapter.db')}`,
      timeScale: 5,
      tenants: 2,
      maxInFlight: 10,
      env: disk.env,
      nodeArgs: disk.nodeArgs,
    });
    cleanups.push(() => drill.close());
    for (let n = 0; n < 6; n += 1) expect((await drill.submit(n, 'respond-async')).status).toBe(202);
    await untilTasks(drill, 6);
    const report = await outage(drill, {
      name: `full disk (${kind})`,
      store: disk,
      downMs: 6000,
      submitEveryMs: 400,
      nextN: counter(6),
      probeEveryMs: 300,
    });
    const submits = report.answers.filter((a) => a.what === 'submit');
    const refused = submits.filter((a) => a.status === 503);
    expect
      .soft(refused.length, `$submit refused while full: ${submits.map((a) => a.status).join(' ')}`)
      .toBeGreaterThanOrEqual(5);
    // From the first $submit the full disk failed on (a 503, or what else it answered).
    const failed = submits.filter((a) => a.status !== 200 && a.status !== 202);
    const readyDownFrom = Math.min(...failed.map((a) => a.sentAt));
    const ready = report.answers.filter((a) => a.what === 'ready' && a.sentAt >= readyDownFrom);
    expect.soft(ready.length, '/ready asked while full').toBeGreaterThanOrEqual(5);
    expectOutageKept(report, { readyDownFrom });
    await expectAllEligible(drill, 40_000);
  }, 120_000);
});
