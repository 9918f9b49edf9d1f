/**
 * GET /.well-known/jwks.json, public: the public keys this service signs its client assertions
 * with at an EHR (a tenant's ehrSchedule and smartLaunch clientKeys), so an EHR can register the
 * adapter by this URL instead of a copied file (docs/ehr-schedule.md). Only the public members of
 * each key leave: never `d` or the other private parts.
 * https://hl7.org/fhir/smart-app-launch/client-confidential-asymmetric.html#registering-a-client-communicating-public-keys
 */
import type { Express } from 'express';
import type { Tenant } from '../config.js';

/** The members of a public JWK (RFC 7517, 7518): everything else of a private key stays here. */
const PUBLIC_MEMBERS = ['kty', 'kid', 'alg', 'use', 'key_ops', 'crv', 'x', 'y', 'n', 'e'];

export function publicJwks(tenants: readonly Tenant[]): { keys: Record<string, unknown>[] } {
  const seen = new Set<string>();
  const keys: Record<string, unknown>[] = [];
  for (const tenant of tenants) {
    for (const key of [
      ...(tenant.ehrSchedule?.clientKeys.keys ?? []),
      ...(tenant.smartLaunch?.clientKeys?.keys ?? []),
    ]) {
      const pub = Object.fromEntries(Object.entries(key).filter(([name]) => PUBLIC_MEMBERS.includes(name)));
      const id = JSON.stringify(pub);
      if (seen.has(id)) continue;
      seen.add(id);
      keys.push(pub);
    }
  }
  return { keys };
}

export function jwksRoute(tenants: readonly Tenant[]): (app: Express) => void {
  const body = publicJwks(tenants);
  return (app) => {
    app.get('/.well-known/jwks.json', (_req, res) => {
      res.setHeader('Cache-Control', 'public, max-age=300');
      res.type('application/jwk-set+json').send(JSON.stringify(body));
    });
  };
}
