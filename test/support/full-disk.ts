/**
 * A disk the drill can fill and empty for the SQLite store (issue 29): a small tmpfs of its own
 * (`mount -t tmpfs -o size=...`, which needs root or CAP_SYS_ADMIN), filled with a junk file up
 * to ENOSPC and emptied by deleting it. Where mounting is refused, the SQLite driver is made to
 * fail every write with SQLITE_FULL instead (test/support/sqlite-full.ts, loaded into the service
 * process), and that is said on the console: the drill runs either way, never skipped.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { OutageStore } from './outage-drill.js';

export type FullDiskKind = 'tmpfs' | 'injected';

export interface FullDisk extends OutageStore {
  kind: FullDiskKind;
  /** Where the SQLite file goes. */
  dir: string;
  /** Environment and node arguments of the service (the injected fault needs them). */
  env: Record<string, string>;
  nodeArgs: string[];
  /** Unmounts and removes the directory (stop the service first). */
  close(): void;
}

/** Whether this process may mount a tmpfs (tried once, on a throwaway directory). */
export function canMountTmpfs(): boolean {
  const dir = mkdtempSync(join(tmpdir(), 'fea-mount-probe-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', dir], { stdio: 'ignore' });
    execFileSync('umount', [dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A disk of `sizeMb` (tmpfs) or a plain directory with the injected fault. */
export function smallDisk(kind: FullDiskKind, sizeMb = 16): FullDisk {
  const dir = mkdtempSync(join(tmpdir(), `fea-full-disk-${kind}-`));
  if (kind === 'injected') {
    const flag = join(dir, 'full');
    return {
      kind,
      dir,
      env: { SQLITE_FULL_FLAG: flag },
      nodeArgs: ['--import', 'tsx', '--import', './test/support/sqlite-full.ts'],
      down: () => Promise.resolve(writeFileSync(flag, '')),
      up: () => Promise.resolve(rmSync(flag, { force: true })),
      close: () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeMb}m`, 'tmpfs', dir]);
  const junk = join(dir, 'junk');
  return {
    kind,
    dir,
    env: {},
    nodeArgs: [],
    down: () => Promise.resolve(fill(junk)),
    up: () => Promise.resolve(rmSync(junk, { force: true })),
    close: () => {
      try {
        execFileSync('umount', ['-l', dir], { stdio: 'ignore' });
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** Writes a file until the disk is full: 1 MB blocks, then 4 KB ones, to the last block. */
function fill(file: string): void {
  const fd = openSync(file, 'w');
  try {
    for (const size of [1 << 20, 4096, 512]) {
      const block = Buffer.alloc(size, 0x5a);
      try {
        for (;;) writeSync(fd, block);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
      }
    }
  } finally {
    closeSync(fd);
  }
}
