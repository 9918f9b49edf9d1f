/**
 * Runs the service as a real child process (`node --import tsx src/main.ts`), as `npm start`
 * does, so tests can SIGKILL it mid-run and run several replicas against one database.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { hashApiKey } from '../../src/config.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface ServiceProcess {
  url: string;
  child: ChildProcess;
  /** Raw stdout + stderr lines. */
  output: string[];
  /** SIGKILL: no shutdown hook runs, leases stay behind as after a crash. */
  kill(): Promise<void>;
  /** SIGTERM and wait for a graceful exit. */
  stop(): Promise<void>;
}

/** Writes a tenants file with `count` tenants `t0..t{n-1}`, inbound key `key-t{i}`. */
export function writeTenantsFile(
  dir: string,
  count: number,
  upstreamKey: string,
  maxInFlight: number,
): string {
  const tenants = Array.from({ length: count }, (_, i) => ({
    id: `t${i}`,
    apiKeys: [`sha256:${hashApiKey(`key-t${i}-0123456789`)}`],
    upstream: { apiKey: 'env:TEST_UPSTREAM_KEY', clinicId: `clinic-t${i}`, clientId: 'EHR-1' },
    practiceId: `P-t${i}`,
    maxInFlight,
  }));
  const path = join(dir, 'tenants.json');
  writeFileSync(path, JSON.stringify({ tenants }));
  process.env.TEST_UPSTREAM_KEY = upstreamKey;
  return path;
}

export function tenantAuth(i: number): { Authorization: string } {
  return { Authorization: `Bearer key-t${i}-0123456789` };
}

/** Starts the service (or another script) and resolves once it logs that it listens. */
export async function spawnService(
  env: Record<string, string>,
  script: string[] = ['src/main.ts'],
  nodeArgs: string[] = [],
): Promise<ServiceProcess> {
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', ...script], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`service did not start:\n${output.join('\n')}`));
    }, 20_000);
    const onLine = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n').filter(Boolean)) {
        output.push(line);
        const match =
          /"message":"listening".*?"url":"([^"]+)"/.exec(line) ??
          /"url":"([^"]+)".*"message":"listening"/.exec(line);
        if (match?.[1]) {
          clearTimeout(timer);
          resolve(match[1]);
        }
      }
    };
    child.stdout.on('data', onLine);
    child.stderr.on('data', onLine);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`service exited with ${String(code)}:\n${output.join('\n')}`));
    });
  });
  return {
    url,
    child,
    output,
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/** Warning and error lines of a service's log, counted by level and message. */
export function logSummary(lines: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of lines) {
    if (!line.startsWith('{')) continue;
    try {
      const entry = JSON.parse(line) as { level?: string; message?: string };
      if (entry.level !== 'warn' && entry.level !== 'error') continue;
      const key = `${entry.level}: ${entry.message ?? '?'}`;
      out[key] = (out[key] ?? 0) + 1;
    } catch {
      // not a JSON log line
    }
  }
  return out;
}
