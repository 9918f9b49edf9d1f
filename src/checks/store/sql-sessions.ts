/**
 * The session store (session-store.ts) on SQLite and PostgreSQL, on the check store's driver.
 * Taking a pending sign-in is one DELETE ... RETURNING: two replicas handed the same `state`
 * cannot both take it.
 */
import type { PendingLogin, SessionPerson, SessionStore, StoredSession } from './session-store.js';
import { int, text } from './rows.js';
import type { Row } from './rows.js';
import type { Dialect, SqlDriver } from './driver.js';
import { one, query } from './driver.js';

const SESSION_COLUMNS =
  'id_hash, tenant_id, person, roles, csrf_token, data, created_at, last_seen_at, expires_at';

export class SqlSessionStore implements SessionStore {
  private readonly dialect: Dialect;

  constructor(private readonly driver: SqlDriver) {
    this.dialect = driver.dialect;
  }

  async createSession(session: StoredSession): Promise<void> {
    const json = this.dialect.json;
    await this.driver.run(
      'write',
      one(
        `INSERT INTO sessions (${SESSION_COLUMNS})
         VALUES ($1, $2, ${json('$3')}, ${json('$4')}, $5, ${json('$6')}, $7, $8, $9)`,
        [
          session.idHash,
          session.tenantId,
          JSON.stringify(session.person),
          JSON.stringify(session.roles),
          session.csrfToken,
          JSON.stringify(session.data),
          session.createdAt,
          session.lastSeenAt,
          session.expiresAt,
        ],
      ),
    );
  }

  async getSession(idHash: string): Promise<StoredSession | null> {
    const [row] = await this.driver.run(
      'single',
      query(`SELECT ${SESSION_COLUMNS} FROM sessions WHERE id_hash = $1`, [idHash]),
    );
    return row ? this.toSession(row) : null;
  }

  async touchSession(idHash: string, lastSeenAt: number): Promise<void> {
    await this.driver.run(
      'write',
      one('UPDATE sessions SET last_seen_at = $1 WHERE id_hash = $2 AND last_seen_at < $1', [
        lastSeenAt,
        idHash,
      ]),
    );
  }

  async updateSessionData(idHash: string, data: Record<string, unknown>): Promise<void> {
    await this.driver.run(
      'write',
      one(`UPDATE sessions SET data = ${this.dialect.json('$1')} WHERE id_hash = $2`, [
        JSON.stringify(data),
        idHash,
      ]),
    );
  }

  async deleteSession(idHash: string): Promise<StoredSession | null> {
    const [row] = await this.driver.run(
      'write',
      query(`DELETE FROM sessions WHERE id_hash = $1 RETURNING ${SESSION_COLUMNS}`, [idHash]),
    );
    return row ? this.toSession(row) : null;
  }

  async purgeSessions(now: number, idleMs: number): Promise<number> {
    const result = await this.driver.run(
      'write',
      one('DELETE FROM sessions WHERE expires_at <= $1 OR last_seen_at <= $2', [now, now - idleMs]),
    );
    return result.changed;
  }

  async savePendingLogin(pending: PendingLogin, now: number): Promise<void> {
    await this.driver.run(
      'write',
      (function* (json: (p: string) => string) {
        // Expired sign-ins are dropped as new ones come: the table stays as small as the traffic.
        yield* one('DELETE FROM pending_logins WHERE expires_at <= $1', [now]);
        yield* one(
          `INSERT INTO pending_logins (state_hash, tenant_id, kind, data, expires_at)
           VALUES ($1, $2, $3, ${json('$4')}, $5)`,
          [
            pending.stateHash,
            pending.tenantId,
            pending.kind,
            JSON.stringify(pending.data),
            pending.expiresAt,
          ],
        );
      })(this.dialect.json),
    );
  }

  async takePendingLogin(stateHash: string, now: number): Promise<PendingLogin | null> {
    const [row] = await this.driver.run(
      'write',
      query(
        `DELETE FROM pending_logins WHERE state_hash = $1
         RETURNING state_hash, tenant_id, kind, data, expires_at`,
        [stateHash],
      ),
    );
    if (!row || int(row, 'expires_at') <= now) return null;
    return {
      stateHash: text(row, 'state_hash'),
      tenantId: text(row, 'tenant_id'),
      kind: text(row, 'kind'),
      data: this.dialect.readJson(row.data) as Record<string, unknown>,
      expiresAt: int(row, 'expires_at'),
    };
  }

  private toSession(row: Row): StoredSession {
    const { readJson } = this.dialect;
    // Written only by createSession and updateSessionData from typed values.
    return {
      idHash: text(row, 'id_hash'),
      tenantId: text(row, 'tenant_id'),
      person: readJson(row.person) as SessionPerson,
      roles: readJson(row.roles) as string[],
      csrfToken: text(row, 'csrf_token'),
      data: readJson(row.data) as Record<string, unknown>,
      createdAt: int(row, 'created_at'),
      lastSeenAt: int(row, 'last_seen_at'),
      expiresAt: int(row, 'expires_at'),
    };
  }
}
