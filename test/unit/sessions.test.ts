/**
 * The page's session cookie and the roles of an ID token (src/http/sessions.ts, src/http/oidc.ts):
 * the cookie's attributes (Secure only on https), what a request's Cookie header names, and roles
 * read from a list, a string or a nested claim.
 */
import type { Request, Response } from 'express';
import { describe, expect, it } from 'vitest';
import type { SessionStore, StoredSession } from '../../src/checks/store/session-store.js';
import { rolesOf } from '../../src/http/oidc.js';
import { cookieOf, digest, Sessions } from '../../src/http/sessions.js';

/** A store that keeps the rows it is given in a map (the SQL stores are tested in test/store). */
function memoryStore(): SessionStore & { rows: Map<string, StoredSession> } {
  const rows = new Map<string, StoredSession>();
  return {
    rows,
    createSession: (s) => Promise.resolve(void rows.set(s.idHash, s)),
    getSession: (h) => Promise.resolve(rows.get(h) ?? null),
    touchSession: (h, at) => Promise.resolve(void (rows.get(h)!.lastSeenAt = at)),
    updateSessionData: () => Promise.resolve(),
    deleteSession: (h) => {
      const row = rows.get(h) ?? null;
      rows.delete(h);
      return Promise.resolve(row);
    },
    purgeSessions: () => Promise.resolve(0),
    savePendingLogin: () => Promise.resolve(),
    takePendingLogin: () => Promise.resolve(null),
  };
}

function response(): Response & { cookies: string[] } {
  const cookies: string[] = [];
  return { cookies, append: (_name: string, value: string) => cookies.push(value) } as unknown as Response & {
    cookies: string[];
  };
}

const person = { issuer: 'https://idp.example.org', subject: 'u-1', name: 'Mariam Desk' };

describe('the session cookie', () => {
  it.each([
    [false, 'eligibility_session=ID; Path=/; HttpOnly; SameSite=Lax; Max-Age=43200'],
    [true, 'eligibility_session=ID; Path=/; HttpOnly; SameSite=Lax; Max-Age=43200; Secure'],
  ])('secure=%s: %s, the id 256 random bits stored only as its SHA-256', async (secure, expected) => {
    const store = memoryStore();
    const sessions = new Sessions({ store, idleMs: 900_000, maxMs: 43_200_000, secure, now: () => 1000 });
    const res = response();
    const session = await sessions.create(res, { tenantId: 'clinic-a', person, roles: ['front-desk'] });
    const id = /^eligibility_session=([^;]+);/.exec(res.cookies[0] ?? '')?.[1] ?? '';
    expect(id).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(res.cookies[0]?.replace(id, 'ID')).toBe(expected);
    expect([...store.rows.keys()]).toEqual([digest(id)]);
    expect(session.csrfToken).not.toBe(id);
  });

  it('ends a session at its idle end and at its absolute end, and deletes the row', async () => {
    const store = memoryStore();
    let now = 0;
    const sessions = new Sessions({ store, idleMs: 1000, maxMs: 5000, secure: false, now: () => now });
    const res = response();
    await sessions.create(res, { tenantId: 'clinic-a', person, roles: [] });
    const req = { headers: { cookie: res.cookies[0]?.split(';')[0] } } as Request;
    for (now = 900; now < 5000; now += 900) expect(await sessions.read(req)).not.toBeNull();
    now = 5000;
    expect(await sessions.read(req)).toBeNull();
    expect(store.rows.size).toBe(0);
  });

  it('reads one cookie of a Cookie header, and nothing else', () => {
    const req = (cookie?: string) => ({ headers: cookie === undefined ? {} : { cookie } }) as Request;
    expect(cookieOf(req('a=1; eligibility_session=abc; b=2'), 'eligibility_session')).toBe('abc');
    expect(cookieOf(req('xeligibility_session=abc'), 'eligibility_session')).toBeUndefined();
    expect(cookieOf(req(), 'eligibility_session')).toBeUndefined();
  });
});

describe('the roles of an ID token', () => {
  it.each([
    [{ roles: ['a', 'b', 3] }, 'roles', ['a', 'b']],
    [{ roles: 'a b' }, 'roles', ['a', 'b']],
    [{ realm_access: { roles: ['ops'] } }, 'realm_access.roles', ['ops']],
    [{}, 'roles', []],
  ])('%j with claim %s: %j', (claims, claim, roles) => {
    expect(rolesOf(claims, claim)).toEqual(roles);
  });
});
