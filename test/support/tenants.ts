/**
 * The tenant of the lifecycle's unit tests (test/unit/lifecycle*.test.ts, store-outage.test.ts):
 * three checks in flight, upstream keys that never leave the test.
 */
import type { Tenant } from '../../src/config.js';

export const LIFECYCLE_TENANT: Tenant = {
  id: 'clinic-a',
  apiKeyHashes: [],
  upstream: { apiKey: 'k', clinicId: 'c', clientId: 'e' },
  practiceId: 'P-1',
  maxInFlight: 3,
};
