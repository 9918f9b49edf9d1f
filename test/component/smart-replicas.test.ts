/**
 * SMART Backend Services across replicas: two service instances share one PostgreSQL store and
 * one signing key (ACCESS_TOKEN_KEYS_FILE). A client assertion used at one is refused at the
 * other (its jti is remembered in the store), and a token one issued is accepted by the other.
 */
import pg from 'pg';
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Harness } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import { testDatabaseUrl } from '../support/postgres.js';
import type { ClientKey } from '../support/smart.js';
import { assertion, clientKey, postToken, serviceKey, tokenForm } from '../support/smart.js';

const PUBLIC_BASE_URL = 'https://adapter.example.org';
const TOKEN_URL = `${PUBLIC_BASE_URL}/auth/token`;
const SCOPE = 'system/CoverageEligibilityResponse.rs';

let one: Harness | undefined;
let two: Harness | undefined;
let key: ClientKey;
const schema = `smart_${process.pid}_${Date.now()}`;
const admin = new pg.Client({ connectionString: testDatabaseUrl() });

beforeAll(async () => {
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  const url = new URL(testDatabaseUrl());
  url.searchParams.set('options', `-c search_path=${schema}`);
  key = await clientKey('ES384');
  const signing = await serviceKey();
  const options = {
    databaseUrl: url.toString(),
    publicBaseUrl: PUBLIC_BASE_URL,
    tokenSigningKeys: [signing.jwk],
    smartClients: { a: [{ clientId: 'engine', jwks: { keys: [key.publicJwk] }, scopes: [SCOPE] }] },
  };
  // One after the other: the second finds the schema migrated.
  one = await startHarness(options);
  two = await startHarness(options);
});

afterAll(async () => {
  await one?.stop();
  await two?.stop();
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await admin.end();
});

describe('two replicas on one PostgreSQL store', () => {
  it('refuse a jti replayed to the other replica, and accept each other’s tokens', async () => {
    if (!one || !two) throw new Error('replicas not started');
    const jwt = await assertion('engine', key, { aud: TOKEN_URL });
    const first = await postToken(one.url, tokenForm(jwt, SCOPE));
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    const replay = await postToken(two.url, tokenForm(jwt, SCOPE));
    expect(replay.status).toBe(401);
    expect(replay.body).toMatchObject({ error: 'invalid_client' });
    expect(String((replay.body as { error_description: string }).error_description)).toContain('jti');

    const token = String((first.body as { access_token: string }).access_token);
    const search = await request(two.url)
      .get('/fhir/CoverageEligibilityResponse')
      .set('Authorization', `Bearer ${token}`);
    expect(search.status).toBe(200);
    const rows = await admin.query(`SELECT count(*)::int AS n FROM ${schema}.assertion_jtis`);
    expect((rows.rows[0] as { n: number }).n).toBe(1);
  });
});
