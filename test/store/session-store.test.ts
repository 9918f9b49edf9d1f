/**
 * Page sessions and pending sign-ins (src/checks/store/sql-sessions.ts) on both stores: a session
 * is found by its hash only, a pending sign-in is taken once even by two callers at once, and an
 * audit record names the person it was written for.
 */
import { describe, expect, it } from 'vitest';
import type { Store } from '../../src/checks/store/appointment-store.js';
import type { StoredSession } from '../../src/checks/store/session-store.js';
import { digest } from '../../src/http/sessions.js';
import { auditRow } from '../../src/checks/store/audit-store.js';
import { buildAuditEvent } from '../../src/fhir/audit-event.js';
import { expectValidFhir } from '../support/fhir.js';
import { postgresBackend, sharedStoreOn, sqliteBackend } from '../support/store-backends.js';

const T0 = Date.parse('2026-11-24T05:00:00Z');

function session(id: string): StoredSession {
  return {
    idHash: digest(id),
    tenantId: 'clinic-a',
    person: { issuer: 'https://idp.example.org', subject: 'u-1', name: 'Mariam Desk' },
    roles: ['front-desk'],
    csrfToken: 'csrf-1',
    data: { note: 'server side' },
    createdAt: T0,
    lastSeenAt: T0,
    expiresAt: T0 + 12 * 3_600_000,
  };
}

describe.each([sqliteBackend(), postgresBackend()])('the session store on $name', (backend) => {
  let store: Store;
  sharedStoreOn(backend, (opened) => (store = opened));

  it('keeps a session by the hash of its id, touches, updates and deletes it', async () => {
    await store.sessions.createSession(session('id-one'));
    const found = await store.sessions.getSession(digest('id-one'));
    expect(found).toEqual(session('id-one'));
    expect(await store.sessions.getSession('id-one')).toBeNull();
    await store.sessions.touchSession(digest('id-one'), T0 + 1000);
    await store.sessions.updateSessionData(digest('id-one'), { ehrToken: 'kept-on-server' });
    expect(await store.sessions.getSession(digest('id-one'))).toMatchObject({
      lastSeenAt: T0 + 1000,
      data: { ehrToken: 'kept-on-server' },
    });
    expect((await store.sessions.deleteSession(digest('id-one')))?.person.subject).toBe('u-1');
    expect(await store.sessions.getSession(digest('id-one'))).toBeNull();
  });

  it('purges sessions past their idle or absolute end, and only those', async () => {
    await store.sessions.createSession({ ...session('idle'), lastSeenAt: T0 - 20 * 60_000 });
    await store.sessions.createSession({ ...session('old'), expiresAt: T0 - 1 });
    await store.sessions.createSession(session('live'));
    expect(await store.sessions.purgeSessions(T0, 15 * 60_000)).toBe(2);
    expect(await store.sessions.getSession(digest('live'))).not.toBeNull();
  });

  it('hands a pending sign-in out once, though two callers ask at the same moment', async () => {
    const pending = {
      stateHash: digest('state-1'),
      tenantId: 'clinic-a',
      kind: 'oidc',
      data: { nonce: 'n', verifier: 'v' },
      expiresAt: T0 + 600_000,
    };
    await store.sessions.savePendingLogin(pending, T0);
    const both = await Promise.all([
      store.sessions.takePendingLogin(pending.stateHash, T0),
      store.sessions.takePendingLogin(pending.stateHash, T0),
    ]);
    expect(both.filter(Boolean)).toEqual([pending]);
    expect(await store.sessions.takePendingLogin(pending.stateHash, T0)).toBeNull();
  });

  it('does not hand out an expired pending sign-in', async () => {
    await store.sessions.savePendingLogin(
      { stateHash: digest('late'), tenantId: 'clinic-a', kind: 'oidc', data: {}, expiresAt: T0 + 10 },
      T0,
    );
    expect(await store.sessions.takePendingLogin(digest('late'), T0 + 10)).toBeNull();
  });

  it('stores the person of an audit record and gives it back as a valid AuditEvent agent', async () => {
    const row = auditRow(
      {
        tenantId: 'clinic-a',
        agentId: 'u-1',
        agentKind: 'person',
        person: { issuer: 'https://idp.example.org', subject: 'u-1', name: 'Mariam Desk' },
        action: 'E',
        interaction: 'login',
        outcome: '0',
      },
      T0,
    );
    await store.insertAuditEvents([row]);
    const [back] = await store.searchAuditEvents('clinic-a', { ids: [row.id] }, 10);
    expect(back?.record.person).toEqual(row.record.person);
    const event = buildAuditEvent(back!.record, back!.id, back!.recordedAt, 'adapter');
    expect(event.type).toMatchObject({ code: '110114' });
    expect(event.subtype?.[0]).toMatchObject({ code: '110122', display: 'Login' });
    expect(event.agent[0]?.who).toEqual({
      identifier: { system: 'https://idp.example.org', value: 'u-1' },
      display: 'Mariam Desk',
    });
    expectValidFhir(event);
  });
});
