/**
 * Entry point: configuration first (one clear line and exit 1 when wrong), then the service.
 */
import { ConfigError, loadConfig } from './config.js';
import { createLogger } from './log.js';
import type { startServer as StartServer } from './server.js';

async function main(): Promise<void> {
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
