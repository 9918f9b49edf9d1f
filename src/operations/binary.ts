/**
 * Documents and the portal screenshot behind stable adapter URLs (the README: never hand
 * out an upstream signed link that will expire). The CER carries `/fhir/Binary/{id}`. Once the
 * document is kept (docs/evidence.md) reading it serves the stored bytes, the same whatever the
 * upstream does later; a document that could not be kept is a 404 that says why; until then,
 * reading it asks the upstream for the task again (links are re-signed on every read,
 * docs/upstream.md) and hands back a fresh link for the caller to stream. The signed link itself
 * never leaves the adapter. Binary read: https://hl7.org/fhir/R4/binary.html#rest
 */
import type { CheckService } from '../checks/service.js';
import type { Tenant } from '../config.js';
import type { UpstreamPort, UpstreamResult } from '../upstream/port.js';
import type { Envelope } from '../upstream/contract.js';
import { parseBinaryId, resolveBinary } from '../mapping/response/binary.js';
import { notFound, OperationOutcomeError, outcome } from '../fhir/outcomes.js';
import { NOT_KEPT_TEXT } from '../mapping/response/evidence.js';
import type { EvidenceStore, KeptDocument } from '../checks/store/evidence-store.js';
import type { FhirRequest } from './types.js';

export interface FreshLink {
  url: string;
  /** The download name: the portal's file name (with its extension), else its label. */
  filename?: string;
  /** From the file name, for a document store that answers without a useful Content-Type. */
  contentType?: string;
}

/**
 * One upstream read serves every document of a task for a few seconds (a CER with five documents
 * opened at once is one poll, not five), well inside the lifetime of the links it returns. One per
 * process, made by the composition root (src/server.ts).
 */
export class FreshResults {
  private readonly results = new Map<string, { at: number; result: Promise<UpstreamResult<Envelope>> }>();

  constructor(
    private readonly upstream: UpstreamPort,
    private readonly freshMs = 3_000,
    private readonly now: () => number = Date.now,
  ) {}

  /** The task's envelope as the upstream answered it in the last few seconds, or a new read. */
  get(tenant: Tenant, taskId: string): Promise<UpstreamResult<Envelope>> {
    const key = `${tenant.id}/${taskId}`;
    const now = this.now();
    const hit = this.results.get(key);
    if (hit && now - hit.at < this.freshMs) return hit.result;
    for (const [k, v] of this.results) if (now - v.at >= this.freshMs) this.results.delete(k);
    // A failed read is kept as long as a good one: while the upstream fails, opening documents
    // must not turn into a burst of requests about one task (every such request counts as a
    // poll of it, docs/polling.md).
    const result = this.upstream.getResult(tenant.upstream, taskId);
    this.results.set(key, { at: now, result });
    return result;
  }
}

/** Finds the fresh signed link for a Binary id of this tenant's check. */
export async function freshDocumentLink(
  req: FhirRequest,
  checks: CheckService,
  fresh: FreshResults,
): Promise<FreshLink> {
  const id = req.params.id ?? '';
  const parsed = parseBinaryId(id);
  const missing = notFound(`Binary/${id} is not known`);
  if (!parsed) throw missing;
  const check = await checks.get(req.tenant.id, parsed.checkId);
  if (!check?.upstreamTaskId) throw missing;
  const result = await fresh.get(req.tenant, check.upstreamTaskId);
  if (!result.ok) {
    const { error } = result;
    if (error.kind === 'http' && error.status === 404)
      throw notFound(`Binary/${id}: the eligibility service no longer has the task it belongs to`);
    if (error.kind === 'http' && (error.status === 401 || error.status === 403)) {
      // Not a moment's trouble: retrying will not help until the clinic's upstream key is fixed.
      throw new OperationOutcomeError(
        outcome('security', 'The eligibility service refused the clinic credentials for this document.'),
        502,
      );
    }
    throw new OperationOutcomeError(
      outcome(
        'transient',
        'The eligibility service did not return the document just now; try again shortly.',
      ),
      502,
      { 'Retry-After': '30' },
    );
  }
  const link = resolveBinary(result.value, parsed);
  if (!link) throw missing;
  const filename = link.filename ?? link.title;
  return {
    url: link.url,
    ...(filename ? { filename } : {}),
    ...(link.contentType ? { contentType: link.contentType } : {}),
  };
}

/**
 * The kept copy of a Binary id of this tenant (docs/evidence.md); null while it is not kept yet
 * (or was never scheduled: an answer from before evidence was kept), when the caller follows a
 * fresh upstream link. A document that could not be kept is a 404 saying why: never shown as kept.
 */
export async function keptDocument(req: FhirRequest, evidence: EvidenceStore): Promise<KeptDocument | null> {
  const id = req.params.id ?? '';
  if (!parseBinaryId(id)) return null;
  const kept = await evidence.read(req.tenant.id, id);
  if (kept) return kept;
  const row = await evidence.get(req.tenant.id, id);
  if (row?.state === 'failed')
    throw notFound(`Binary/${id} was not kept: ${NOT_KEPT_TEXT[row.reason ?? 'unavailable']}`);
  return null;
}
