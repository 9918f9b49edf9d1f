/**
 * `npm run sandbox`: the upstream simulator alone. SANDBOX_PORT (default 8090), SANDBOX_HOST
 * (default 0.0.0.0), SANDBOX_TIME_SCALE (default 1), SANDBOX_API_KEYS (comma-separated),
 * SANDBOX_DURATION_SEED (an integer: a realistic spread of durations per payer, docs/sandbox.md).
 */
import { startSandbox } from './index.js';

const env = process.env;
const sandbox = await startSandbox({
  port: Number(env.SANDBOX_PORT ?? 8090),
  host: env.SANDBOX_HOST ?? '0.0.0.0',
  timeScale: Number(env.SANDBOX_TIME_SCALE ?? 1),
  apiKeys: env.SANDBOX_API_KEYS ? env.SANDBOX_API_KEYS.split(',').map((k) => k.trim()) : undefined,
  durationSeed: env.SANDBOX_DURATION_SEED ? Number(env.SANDBOX_DURATION_SEED) : undefined,
});
process.stdout.write(`upstream sandbox listening on ${sandbox.url}\n`);

function stop(): void {
  sandbox.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
}
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
