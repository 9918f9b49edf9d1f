/**
 * Evidence (docs/evidence.md): the portal's screenshot and letters of a check's final answer, kept
 * in the store so that a claim disputed months later still has what the payer showed that day.
 * One row per document of the answer (its Binary id), written `pending` in the transaction of the
 * CER's first final version; the capture worker (checks/evidence-worker.ts) claims pending rows
 * with a lease, like a check or a delivery, downloads each and writes it `kept` (the bytes in
 * evidence_blobs, one row per SHA-256) or `failed` with its reason.
 */
import type { CoverageEligibilityResponse } from 'fhir/r4.js';
import type { DateRange, EvidenceItem, TokenValue } from './check-store.js';

export type { EvidenceItem, NewEvidence } from './check-store.js';

/** pending: to download; kept: its bytes are stored; failed: could not be kept (reason). */
export const EVIDENCE_STATES = ['pending', 'kept', 'failed'] as const;
export type EvidenceState = (typeof EVIDENCE_STATES)[number];

/** Why a document could not be kept (said so in the CER's narrative). */
export const NOT_KEPT_REASONS = ['expired', 'refused', 'too-big', 'unavailable'] as const;
export type NotKeptReason = (typeof NOT_KEPT_REASONS)[number];

export interface Evidence extends EvidenceItem {
  tenantId: string;
  checkId: string;
  state: EvidenceState;
  reason: NotKeptReason | null;
  attempts: number;
  nextRunAt: number;
  leaseOwner: string | null;
  /** Hex SHA-256 of the bytes (the blob's key); null until kept. */
  sha256: string | null;
  /** Base64 SHA-1 of the bytes (R4 Attachment.hash); null until kept. */
  sha1: string | null;
  size: number | null;
  /** When the check finished (the answer's time): the DocumentReference's creation. */
  createdAt: number;
  /** When the bytes were stored; null until kept. */
  keptAt: number | null;
}

/** A check's CER rewritten with a note, over the version it was read at. */
export interface CerNote {
  version: number;
  cer: CoverageEligibilityResponse;
}

/** A kept document with its bytes (GET /fhir/Binary/{id}). */
export interface KeptDocument {
  evidence: Evidence;
  bytes: Buffer;
}

/** What a capture writes for a downloaded document. */
export interface KeptBytes {
  bytes: Buffer;
  sha256: string;
  sha1: string;
  contentType: string | null;
}

export interface EvidenceClaim {
  owner: string;
  now: number;
  leaseMs: number;
  limit: number;
}

/** The filters of a DocumentReference search (each list an OR; ranges ANDed). */
export interface EvidenceFilters {
  patient?: TokenValue[];
  checkIds?: string[];
  keptAt?: DateRange[];
}

export interface EvidenceStore {
  /** Pending rows whose time has come and that no live lease holds, with a lease; oldest first. */
  claimDue(claim: EvidenceClaim): Promise<Evidence[]>;
  /**
   * Stores the bytes (once per SHA-256) and marks the row kept; false when the claim was lost. With
   * `note`, the check's CER as it gives it in the same transaction (a document that was said not
   * kept yet is kept now), as `fail` does.
   */
  keep(id: string, owner: string, kept: KeptBytes, now: number, note?: CerNote): Promise<boolean>;
  /**
   * Tries again at `nextRunAt`; false when the claim was lost. With `note`, the check's CER as it
   * gives it in the same transaction (its narrative says the document is not kept yet, and when it
   * is tried again), as `fail` does.
   */
  retry(id: string, owner: string, nextRunAt: number, now: number, note?: CerNote): Promise<boolean>;
  /**
   * Marks the row failed for good and, in the same transaction, stores the check's CER as `note`
   * gives it (its narrative says the document could not be kept) as the next version of
   * `note.version`. False when the claim was lost; throws when the CER moved on meanwhile (the
   * lease runs out and another round decides again).
   */
  fail(id: string, owner: string, reason: NotKeptReason, now: number, note?: CerNote): Promise<boolean>;
  /** A tenant's document row by its Binary id; null for an unknown id or another tenant's. */
  get(tenantId: string, id: string): Promise<Evidence | null>;
  /** A tenant's kept document with its bytes; null when not kept (or not the tenant's). */
  read(tenantId: string, id: string): Promise<KeptDocument | null>;
  /** The rows of one check (any state), in id order. */
  ofCheck(tenantId: string, checkId: string): Promise<Evidence[]>;
  /** A tenant's kept documents matching the filters, newest kept first, `count` from `offset`. */
  search(tenantId: string, filters: EvidenceFilters, count: number, offset: number): Promise<Evidence[]>;
  /** Drops every lease this owner holds (graceful shutdown). */
  releaseAll(owner: string): Promise<void>;
  /** What the evidence takes in the store: kept documents, stored blobs and their bytes. */
  usage(): Promise<EvidenceUsage>;
}

export interface EvidenceUsage {
  /** Documents kept (rows `kept`). */
  kept: number;
  /** Distinct byte strings stored (one per SHA-256). */
  blobs: number;
  /** Their bytes, deduplicated. */
  bytes: number;
}
