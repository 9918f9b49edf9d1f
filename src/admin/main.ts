/**
 * Entry point of the operator command: `npm run admin -- guards | reset-guard <tenant> <payer> | stuck`.
 */
import { runAdmin } from './commands.js';
import { openStore } from '../checks/store/open.js';
import { createLogger } from '../log.js';

const store = await openStore(process.env.DATABASE_URL ?? 'sqlite:data/adapter.db');
await store.migrate();
const code = await runAdmin(store, process.argv.slice(2), {
  out: (line) => process.stdout.write(`${line}\n`),
  logger: createLogger(process.env.LOG_LEVEL ?? 'info'),
  now: Date.now,
});
await store.close();
process.exit(code);
