/**
 * Loaded into the service process (`--import`) where the machine does not let a test mount a
 * small tmpfs: every SQLite statement that writes fails with SQLITE_FULL ("database or disk is
 * full", as better-sqlite3 reports a full disk) while the file named by SQLITE_FULL_FLAG exists.
 * Reads keep working, as on a full disk. Test support only: nothing in src/ knows of it.
 */
import { existsSync } from 'node:fs';
import Database from 'better-sqlite3';

const flag = process.env.SQLITE_FULL_FLAG;
if (flag) {
  const probe = new Database(':memory:');
  const statement = Object.getPrototypeOf(probe.prepare('SELECT 1')) as Record<string, unknown>;
  probe.close();
  for (const name of ['run', 'get', 'all', 'iterate'] as const) {
    const original = statement[name] as (this: Database.Statement, ...args: unknown[]) => unknown;
    statement[name] = function (this: Database.Statement, ...args: unknown[]) {
      if (!this.readonly && existsSync(flag))
        throw new Database.SqliteError('database or disk is full', 'SQLITE_FULL');
      return original.apply(this, args);
    };
  }
}
