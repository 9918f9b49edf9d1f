/**
 * Entry point: configuration first (one clear line and exit 1 when wrong), then the service.
 */
import { setFlagsFromString } from 'node:v8';
import { ConfigError, loadConfig } from './config.js';
import { createLogger } from './log.js';
import type { startServer as StartServer } from './server.js';

/**
 * V8 lets the old generation grow to up to 4x what survived the last full collection before it
 * collects again (the factor is chosen from GC and allocation speed; 4 is the cap on a machine
 * with more than 2 GB of heap allowed). Under the $submit burst and the polling of 10,000 checks
 * about 55 MB survive and the heap grew to 250-280 MB of mostly garbage before the next full
 * collection: an RSS peak of 330-385 MB. A fixed factor of 2 keeps the heap at 115-135 MB and RSS
 * at 225-265 MB for the same polls and the same CPU (bench/README.md, figure 3); unlike
 * --max-old-space-size it puts no ceiling on the heap, so a bigger live set is never squeezed.
 * Set at run time, so `npm start`, the image and the benches run with it; an operator's own
 * `node --heap-growing-percent=N` (0: V8's own choice) wins. NODE_OPTIONS does not take the flag.
 */
const HEAP_GROWING_PERCENT = 100;

function limitHeapGrowth(): void {
  const given = process.execArgv.some((arg) => /^--heap[-_]growing[-_]percent/.test(arg));
  if (!given) setFlagsFromString(`--heap-growing-percent=${HEAP_GROWING_PERCENT}`);
}

async function main(): Promise<void> {
  limitHeapGrowth();
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`configuration error: ${error.message}\n`);
      process.exit(1);
    }
    throw error;
  }
  // Loaded here, not imported at the top: a broken table in mappings/ (read when the modules
  // load) then stops the process with one line, like a wrong variable, not with a stack trace.
  let startServer: typeof StartServer;
  try {
    ({ startServer } = await import('./server.js'));
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    process.stderr.write(
      `configuration error: ${message.replace(/:\s*\n\s*/g, ': ').replace(/\s*\n\s*/g, '; ')}\n`,
    );
    process.exit(1);
  }
  const logger = createLogger(config.logLevel);
  const running = await startServer(config, logger);
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info('shutting down', { signal });
    running.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error('shutdown failed', { error });
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((error: unknown) => {
  process.stderr.write(`fatal: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
