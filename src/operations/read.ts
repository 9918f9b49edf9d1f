/**
 * Reads of a check: the CER (versioned, conditional read with If-None-Match) and the stored
 * request (https://hl7.org/fhir/R4/http.html#read, #cread). Another tenant's id is 404.
 */
import type { CoverageEligibilityRequest } from 'fhir/r4.js';
import type { CheckService } from '../checks/service.js';
import { etagOf } from './check-answer.js';
import { notFound } from '../fhir/outcomes.js';
import type { FhirAnswer, FhirRequest } from './types.js';

const ID = /^[A-Za-z0-9\-.]{1,64}$/;

/** The tenant's check of the request's id, else 404 naming `type` (another tenant's id is 404). */
export async function findCheck(req: FhirRequest, checks: CheckService, type: string) {
  const id = req.params.id ?? '';
  const check = ID.test(id) ? await checks.get(req.tenant.id, id) : null;
  if (!check) throw notFound(`${type}/${id} is not known`);
  return check;
}

/** True when an If-None-Match value names this version (weak or strong, or *). */
function matches(ifNoneMatch: string | undefined, version: number): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch.split(',').some((tag) => {
    const t = tag.trim();
    return t === '*' || t.replace(/^W\//, '') === `"${version}"`;
  });
}

/**
 * Encoded CERs of recent reads, by tenant and id, with their version: a client polling a CER (or
 * many clients reading one) costs a version probe, not a read of the whole document. A newer
 * version in the store, on any replica, replaces the entry on the next read. One per process,
 * made by the composition root (src/server.ts).
 */
export class CerCache {
  private readonly entries = new Map<string, { version: number; body: Buffer }>();

  constructor(private readonly maxEntries = 256) {}

  /** The encoded CER of this version, if it is the one remembered. */
  get(key: string, version: number): Buffer | undefined {
    const cached = this.entries.get(key);
    return cached?.version === version ? cached.body : undefined;
  }

  /** Remembers a CER's text (the least recently remembered entry goes past maxEntries). */
  remember(key: string, version: number, json: string): Buffer {
    const body = Buffer.from(json, 'utf8');
    this.entries.delete(key);
    this.entries.set(key, { version, body });
    if (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value as string);
    return body;
  }
}

/** The CER read (the hot path of a polling client): conditional, cached, never re-serialized. */
export async function readResponse(
  req: FhirRequest,
  checks: CheckService,
  cache: CerCache,
): Promise<FhirAnswer> {
  const id = req.params.id ?? '';
  const stat = ID.test(id) ? await checks.store.getCerVersion(req.tenant.id, id) : null;
  if (!stat) throw notFound(`CoverageEligibilityResponse/${id} is not known`);
  const headers = { ETag: etagOf(stat.version), 'Last-Modified': new Date(stat.updatedAt).toUTCString() };
  if (matches(req.ifNoneMatch, stat.version)) return { status: 304, headers };
  const key = `${req.tenant.id}/${id}`;
  const cached = cache.get(key, stat.version);
  if (cached) return { status: 200, rawBody: cached, headers };
  const stored = await checks.store.getCerJson(req.tenant.id, id);
  if (!stored) throw notFound(`CoverageEligibilityResponse/${id} is not known`);
  const body = cache.remember(key, stored.version, stored.json);
  return {
    status: 200,
    rawBody: body,
    headers: { ETag: etagOf(stored.version), 'Last-Modified': new Date(stored.updatedAt).toUTCString() },
  };
}

/**
 * vread (https://hl7.org/fhir/R4/http.html#vread): the service keeps only the current version of a
 * CER (the versions before it were transient "still checking" states, replaced in place), so the
 * current version is served when `vid` names it, and any other version is 404, which http.html
 * allows for a version the server does not hold. The CapabilityStatement says readHistory false.
 */
export async function vreadResponse(req: FhirRequest, checks: CheckService): Promise<FhirAnswer> {
  const id = req.params.id ?? '';
  const vid = req.params.vid ?? '';
  const stored = ID.test(id) ? await checks.store.getCerJson(req.tenant.id, id) : null;
  if (!stored) throw notFound(`CoverageEligibilityResponse/${id} is not known`);
  if (vid !== String(stored.version))
    throw notFound(
      `CoverageEligibilityResponse/${id} is at version ${stored.version}; past versions are not kept (only the current version of a CER is stored)`,
    );
  return {
    status: 200,
    rawBody: stored.json,
    headers: { ETag: etagOf(stored.version), 'Last-Modified': new Date(stored.updatedAt).toUTCString() },
  };
}

/**
 * A tenant's stored request: an appointment's (docs/previsit.md: its status as last patched; its
 * booking answer may be a reused one, with no check of this id), else the request of the check of
 * that id. A pre-visit re-check has no request of its own (its CER refers to its appointment's).
 */
export async function storedRequest(
  checks: CheckService,
  tenantId: string,
  id: string,
): Promise<CoverageEligibilityRequest | null> {
  if (!ID.test(id)) return null;
  const appointment = await checks.store.appointments.get(tenantId, id);
  if (appointment) return appointment.input.request;
  const check = await checks.get(tenantId, id);
  return check?.request.id === id ? check.request : null;
}

export async function readRequest(req: FhirRequest, checks: CheckService): Promise<FhirAnswer> {
  const id = req.params.id ?? '';
  const request = await storedRequest(checks, req.tenant.id, id);
  if (!request) throw notFound(`CoverageEligibilityRequest/${id} is not known`);
  return { status: 200, body: request, headers: { ETag: etagOf(1) } };
}
