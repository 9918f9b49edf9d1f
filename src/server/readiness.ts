/**
 * `/ready`: the store read and written, the upstream's `/health`, the FHIR definitions loaded
 * (docs/operations.md).
 */
import type { CheckStore } from '../checks/store/check-store.js';
import { recentWriteFailure } from '../checks/store/outage.js';
import { fhirDefinitionsLoaded } from '../fhir/validator.js';
import type { ReadyReport } from '../http/app.js';
import type { UpstreamPort } from '../upstream/port.js';

/**
 * Whether the store can be read AND written now: a store that reads but cannot write (a full disk,
 * a standby after a failover) cannot take a check, so a load balancer must send work elsewhere. A
 * write that failed for a store reason in the last seconds counts too: on a full disk a one-row
 * probe can still fit where a check's CER does not (docs/operations.md, "When the store fails").
 */
async function storeReadiness(store: CheckStore, now: number): Promise<{ ok: boolean; detail?: string }> {
  try {
    await store.ping();
  } catch {
    return { ok: false, detail: 'store unreachable' };
  }
  try {
    await store.probeWrite(now);
  } catch {
    return { ok: false, detail: 'store cannot be written' };
  }
  if (recentWriteFailure(store.health(), now))
    return { ok: false, detail: 'store refused a write in the last seconds' };
  return { ok: true };
}

export async function readiness(store: CheckStore, upstream: UpstreamPort): Promise<ReadyReport> {
  const [storeCheck, upstreamCheck] = await Promise.all([
    storeReadiness(store, Date.now()),
    upstream.health().then((r) => (r.ok ? { ok: true } : { ok: false, detail: 'upstream /health failed' })),
  ]);
  // No cold start on the request path: the first $submit would otherwise load the R4 definitions
  // (about a second of CPU) while it is answered, stalling every other request meanwhile.
  const definitions = fhirDefinitionsLoaded()
    ? { ok: true }
    : { ok: false, detail: 'loading FHIR definitions' };
  return {
    ready: storeCheck.ok && upstreamCheck.ok && definitions.ok,
    checks: { store: storeCheck, upstream: upstreamCheck, definitions },
  };
}
