/**
 * The evidence capture (docs/evidence.md): claims the pending documents of final answers with a
 * lease, like a check or a delivery, and keeps each in the store while its link is fresh. Never in
 * the answer's path: the finish only writes the rows, with the final CER.
 *
 * - The first try uses the link of the envelope the check finished with (seconds old); a refused
 *   link is renewed by one new get-result read of the task, shared by the check's documents in
 *   the round (the upstream re-signs links on every read, docs/upstream.md). Never a create-task.
 * - A failed download is retried with back-off while the link can still be renewed; once the
 *   upstream no longer has the task, or after the last try, the document is not kept.
 * - At most EVIDENCE_MAX_BYTES each, enforced while the body streams (upstream/documents.ts).
 * - A document not kept is said so in the CER's narrative (a new version, mapping/response/evidence.ts):
 *   from its first failed try, "not kept yet" with the next try (a version per try); once given up,
 *   "not kept" with why; kept after all, back as it was. Never shown as kept before it is.
 * - A store outage: the write throws, the lease runs out, a later round downloads it again.
 */
import { createHash } from 'node:crypto';
import type { Tenant } from '../config.js';
import type { Logger } from '../log.js';
import { askedOf } from '../mapping/response/base.js';
import { parseBinaryId, resolveBinary } from '../mapping/response/binary.js';
import {
  documentOf,
  isNotKeptYet,
  markKept,
  markNotKept,
  markNotKeptYet,
  type NotKeptYetWhy,
} from '../mapping/response/evidence.js';
import { withNarrative } from '../mapping/response/narrative.js';
import type { Envelope } from '../upstream/contract.js';
import { envelopeSchema } from '../upstream/contract.js';
import { downloadDocument, type Download } from '../upstream/documents.js';
import type { UpstreamPort } from '../upstream/port.js';
import type { Store } from './store/appointment-store.js';
import type { Check } from './store/check-store.js';
import type { CerNote, Evidence, NotKeptReason } from './store/evidence-store.js';
import { FailureStreak } from './store/outage.js';
import { RoundLoop } from './round-loop.js';

export interface EvidenceWorkerDeps {
  store: Store;
  upstream: UpstreamPort;
  tenant: (id: string) => Tenant | undefined;
  logger: Logger;
  /** Replica identity; claims carry `owner:round`. */
  owner: string;
  now: () => number;
  leaseMs: number;
  idleMs: number;
  batchSize: number;
  /** EVIDENCE_MAX_BYTES. */
  maxBytes: number;
  /** Origins besides https that document links may point at (the upstream's own). */
  documentOrigins: readonly string[];
  /** The first back-off; each try doubles it (at most an hour). */
  retryMs: number;
  /** Tries before a document is given up (the link is renewed at each). */
  maxAttempts: number;
  onEvent?: (event: EvidenceEvent) => void;
}

export type EvidenceEvent =
  | { type: 'kept'; tenantId: string; bytes: number; afterMs: number }
  | { type: 'not-kept'; tenantId: string; reason: NotKeptReason }
  | { type: 'retry'; tenantId: string };

/** One check's documents in a round: the check, and its envelope as last read. */
interface CheckRound {
  check: Check | null;
  envelope: Envelope | undefined;
  /** A fresh read was made this round (at most one per check). */
  renewed: boolean;
  /** The upstream no longer has the task: its links cannot be renewed. */
  gone: boolean;
  note: CerNote | null;
}

export class EvidenceWorker {
  private readonly loop: RoundLoop;
  private round = 0;
  private readonly steps: FailureStreak;

  constructor(private readonly deps: EvidenceWorkerDeps) {
    this.steps = new FailureStreak(deps.logger, 'evidence capture');
    this.loop = new RoundLoop({
      logger: deps.logger,
      what: 'evidence round',
      idleMs: deps.idleMs,
      round: () => this.tick(),
      release: { what: 'evidence worker', leases: () => deps.store.evidence.releaseAll(deps.owner) },
    });
  }

  start(): void {
    this.loop.start();
  }

  /** A final answer with documents was written: capture them now. */
  wake(): void {
    this.loop.wake();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
  }

  /** One round: claims due documents and captures each. Returns how many were claimed. */
  async tick(): Promise<number> {
    this.round += 1;
    const owner = `${this.deps.owner}:${this.round}`;
    const claimed = await this.deps.store.evidence.claimDue({
      owner,
      now: this.deps.now(),
      leaseMs: this.deps.leaseMs,
      limit: this.deps.batchSize,
    });
    const rounds = new Map<string, Promise<CheckRound>>();
    // The documents of one check one after the other (one fresh read, one CER version at a
    // time); different checks at once.
    const byCheck = new Map<string, Evidence[]>();
    for (const row of claimed) byCheck.set(row.checkId, [...(byCheck.get(row.checkId) ?? []), row]);
    await Promise.all(
      [...byCheck.values()].map(async (rows) => {
        for (const row of rows) {
          // The lease runs out and a later round tries again: nothing is lost.
          await this.steps.step(
            async () => {
              let state = rounds.get(row.checkId);
              if (!state) {
                state = this.begin(row);
                rounds.set(row.checkId, state);
              }
              await this.capture(row, owner, await state);
            },
            'evidence capture failed',
            { checkId: row.checkId, evidenceId: row.id },
          );
        }
      }),
    );
    return claimed.length;
  }

  private async begin(row: Evidence): Promise<CheckRound> {
    const check = await this.deps.store.get(row.tenantId, row.checkId);
    const parsed = envelopeSchema.safeParse(check?.envelope);
    return {
      check,
      envelope: parsed.success ? parsed.data : undefined,
      renewed: false,
      gone: false,
      note: check ? { version: check.version, cer: check.cer } : null,
    };
  }

  /** A new get-result read of the task: fresh links. Once per check and round. */
  private async renew(state: CheckRound, tenant: Tenant): Promise<void> {
    if (state.renewed || !state.check?.upstreamTaskId) return;
    state.renewed = true;
    const result = await this.deps.upstream.getResult(tenant.upstream, state.check.upstreamTaskId);
    if (result.ok) state.envelope = result.value;
    else if (result.error.kind === 'http' && result.error.status === 404) state.gone = true;
  }

  private async download(row: Evidence, state: CheckRound): Promise<Download> {
    const ref = parseBinaryId(row.id);
    const link = ref && state.envelope ? resolveBinary(state.envelope, ref) : null;
    if (!link) return { ok: false, reason: 'expired' };
    return downloadDocument(link.url, this.deps.maxBytes, this.deps.documentOrigins);
  }

  private async capture(row: Evidence, owner: string, state: CheckRound): Promise<void> {
    const { store, logger } = this.deps;
    const tenant = this.deps.tenant(row.tenantId);
    if (!state.check || !tenant) {
      // The check was purged, or its tenant taken out of the tenants file: nothing to keep it for.
      await store.evidence.fail(row.id, owner, 'unavailable', this.deps.now());
      return;
    }
    // The first try uses the link the check finished with; later tries, and a refused link, a
    // link renewed by a new read.
    if (row.attempts > 0) await this.renew(state, tenant);
    let got = await this.download(row, state);
    if (!got.ok && got.reason !== 'too-big' && !state.renewed) {
      await this.renew(state, tenant);
      got = await this.download(row, state);
    }
    const now = this.deps.now();
    const log = { checkId: row.checkId, evidenceId: row.id, tenantId: row.tenantId };
    if (got.ok) {
      // A document said not kept yet in the CER is said kept again (a new version, same transaction).
      const wasNoted = state.note && isNotKeptYet(documentOf(state.note.cer, row.id));
      const note = wasNoted && state.note ? this.noted(state.check, state.note, row.id, 'kept') : undefined;
      const kept = await store.evidence.keep(
        row.id,
        owner,
        {
          bytes: got.bytes,
          sha256: createHash('sha256').update(got.bytes).digest('hex'),
          sha1: createHash('sha1').update(got.bytes).digest('base64'),
          contentType: usefulType(got.contentType),
        },
        now,
        note,
      );
      if (kept && note) state.note = { version: note.version + 1, cer: note.cer };
      if (kept) {
        logger.info('document kept', { ...log, bytes: got.bytes.length });
        this.deps.onEvent?.({
          type: 'kept',
          tenantId: row.tenantId,
          bytes: got.bytes.length,
          afterMs: now - row.createdAt,
        });
      }
      return;
    }
    const final = got.reason === 'too-big' || state.gone || row.attempts + 1 >= this.deps.maxAttempts;
    if (!final && got.reason !== 'too-big') {
      const backoff = Math.min(3_600_000, this.deps.retryMs * 2 ** row.attempts);
      // From the first failed try on, the CER says the document is not kept yet, and when it is
      // tried again (a new version at each try: the time moves on).
      const yet = { why: got.reason, nextTryAt: now + backoff };
      const note =
        state.note && documentOf(state.note.cer, row.id)
          ? this.noted(state.check, state.note, row.id, yet)
          : undefined;
      if (await store.evidence.retry(row.id, owner, now + backoff, now, note)) {
        if (note) state.note = { version: note.version + 1, cer: note.cer };
        logger.warn('document not downloaded; will try again', { ...log, reason: got.reason, inMs: backoff });
        this.deps.onEvent?.({ type: 'retry', tenantId: row.tenantId });
      }
      return;
    }
    // Given up: the upstream forgot the task (its links cannot be renewed), or every try was refused.
    const reason: NotKeptReason =
      got.reason === 'too-big'
        ? 'too-big'
        : state.gone
          ? 'expired'
          : got.reason === 'expired'
            ? 'refused'
            : got.reason;
    const note = state.note ? this.noted(state.check, state.note, row.id, reason) : undefined;
    if (await store.evidence.fail(row.id, owner, reason, now, note)) {
      if (note) state.note = { version: note.version + 1, cer: note.cer };
      logger.warn('document not kept', { ...log, reason });
      this.deps.onEvent?.({ type: 'not-kept', tenantId: row.tenantId, reason });
    }
  }

  /**
   * The CER with the document marked not kept (a reason), not kept yet (why and the next try) or
   * kept again (`kept`), and its narrative rendered again.
   */
  private noted(
    check: Check,
    note: CerNote,
    id: string,
    mark: NotKeptReason | 'kept' | { why: NotKeptYetWhy; nextTryAt: number },
  ): CerNote {
    const marked =
      mark === 'kept'
        ? markKept(note.cer, id)
        : typeof mark === 'string'
          ? markNotKept(note.cer, id, mark)
          : markNotKeptYet(note.cer, id, mark.why, mark.nextTryAt);
    return { version: note.version, cer: withNarrative(marked, askedOf(check.request)) };
  }
}

const GENERIC_TYPES = new Set(['application/octet-stream', 'binary/octet-stream']);

/** The download's own type, unless it is a generic one (then the file name's is kept). */
function usefulType(type: string | null): string | null {
  if (!type) return null;
  return GENERIC_TYPES.has(type.split(';')[0]?.trim().toLowerCase() ?? '') ? null : type;
}
