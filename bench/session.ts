/**
 * An /app/api call with a person's session against the same call with an API key (issue 34,
 * bench/README.md "Sign-in (issue 34)"). One service in this process (SQLite store, sandbox
 * upstream), two tenants: clinic-a signs people in (a session row made directly in the store, its
 * cookie sent), clinic-b keeps its API key. Blocks of BENCH_BLOCK calls alternate between the two,
 * so a drift of the machine's load falls on both alike; the figure is the median of the per-block
 * ratios. Two measures:
 * - `cpu`: the service's CPU per call (process.cpuUsage), each call handed to the app on a mock
 *   socket in this process (bench/lib.ts getInProcess): no network, no client;
 * - `http`: wall time per call over loopback HTTP (undici, BENCH_CONCURRENCY at a time).
 *
 *   npx tsx bench/session.ts
 *
 * Routes: /app/api/settings (no store work: the sign-in is most of the call) and /app/api/payers
 * (a store search: what the page asks at sign-in). BENCH_ROUNDS (12) pairs per route and measure.
 */
import { Agent, request } from 'undici';
import { hashApiKey } from '../src/config.js';
import { createLogger } from '../src/log.js';
import { startServer } from '../src/server.js';
import { startSandbox } from '../src/sandbox/index.js';
import { digest, randomToken } from '../src/http/sessions.js';
import { testConfig, UPSTREAM_KEY } from '../test/support/harness.js';
import { getInProcess, machine, record } from './lib.js';

const block = Number(process.env.BENCH_BLOCK ?? 2000);
const rounds = Number(process.env.BENCH_ROUNDS ?? 12);
const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 16);
const KEY_B = 'bench-key-of-clinic-b-4f1a';

/** Runs a block of GETs in process, 16 at a time; resolves with the service's CPU µs per call. */
async function cpuBlock(
  handle: Parameters<typeof getInProcess>[0],
  path: string,
  headers: Record<string, string>,
): Promise<number> {
  let left = block;
  const before = process.cpuUsage();
  const worker = async () => {
    while (left > 0) {
      left -= 1;
      const status = await getInProcess(handle, path, headers);
      if (status !== 200) throw new Error(`${path} answered ${status}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const used = process.cpuUsage(before);
  return (used.user + used.system) / block;
}

/** Runs a block of GETs over HTTP, `concurrency` at a time; resolves with the wall ms per call. */
async function httpBlock(dispatcher: Agent, url: string, headers: Record<string, string>): Promise<number> {
  let left = block;
  const started = process.hrtime.bigint();
  const worker = async () => {
    while (left > 0) {
      left -= 1;
      const res = await request(url, { dispatcher, headers });
      await res.body.dump();
      if (res.statusCode !== 200) throw new Error(`${url} answered ${res.statusCode}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return Number(process.hrtime.bigint() - started) / 1e6 / block;
}

type Sides = Record<'session' | 'apiKey', Record<string, string>>;

/** Alternating blocks of the two sides (which goes first alternates too): medians and ratios. */
async function pair(run: (headers: Record<string, string>) => Promise<number>, sides: Sides) {
  await run(sides.session);
  await run(sides.apiKey);
  const session: number[] = [];
  const apiKey: number[] = [];
  const ratios: number[] = [];
  for (let round = 0; round < rounds; round += 1) {
    const order: (keyof Sides)[] = round % 2 === 0 ? ['session', 'apiKey'] : ['apiKey', 'session'];
    const times: Partial<Record<keyof Sides, number>> = {};
    for (const side of order) times[side] = await run(sides[side]);
    session.push(times.session!);
    apiKey.push(times.apiKey!);
    ratios.push(times.session! / times.apiKey!);
  }
  const round3 = (n: number) => Math.round(n * 1000) / 1000;
  return {
    session: round3(median(session)),
    apiKey: round3(median(apiKey)),
    medianRatio: round3(median(ratios)),
    ratios: ratios.map(round3),
  };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

async function main(): Promise<void> {
  const sandbox = await startSandbox({ port: 0, timeScale: 0.01, apiKeys: [UPSTREAM_KEY] });
  const config = testConfig(sandbox.url);
  const [a, b] = config.tenants;
  config.tenants = [
    {
      ...a!,
      oidc: {
        issuer: 'https://login.example.org',
        clientId: 'page',
        clientSecret: 'unused',
        rolesClaim: 'roles',
        operatorRoles: [],
      },
    },
    { ...b!, apiKeyHashes: [hashApiKey(KEY_B)] },
  ];
  config.logLevel = 'warn';
  const server = await startServer(config, createLogger('warn'));
  const id = randomToken();
  const now = Date.now();
  await server.store.sessions.createSession({
    idHash: digest(id),
    tenantId: 'clinic-a',
    person: { issuer: 'https://login.example.org', subject: 'bench', name: 'Bench Desk' },
    roles: [],
    csrfToken: randomToken(),
    data: {},
    createdAt: now,
    lastSeenAt: now,
    expiresAt: now + 12 * 3_600_000,
  });
  const sides: Sides = {
    session: { cookie: `eligibility_session=${id}` },
    apiKey: { authorization: `Bearer ${KEY_B}` },
  };
  const results: Record<string, unknown> = {};
  try {
    for (const route of ['/app/api/settings', '/app/api/payers']) {
      const cpu = await pair((headers) => cpuBlock(server.app, route, headers), sides);
      // A pool of its own per route: the server closes a connection left idle through the CPU
      // blocks (its keep-alive timeout), and undici would send the next call on it (ECONNRESET).
      const dispatcher = new Agent({ connections: concurrency, pipelining: 1 });
      const http = await pair(
        (headers) => httpBlock(dispatcher, `${server.url}${route}`, headers),
        sides,
      ).finally(() => dispatcher.close());
      results[route] = { cpuUsPerCall: cpu, httpMsPerCall: http };
      process.stderr.write(`${route}: ${JSON.stringify(results[route])}\n`);
    }
  } finally {
    await server.stop();
    await sandbox.close();
  }
  await record('session', { machine: machine(), block, rounds, concurrency, store: 'sqlite', results });
}

void main();
