/**
 * The small JSON answers of the front-desk page (/app/, docs/front-desk.md): the payers (known and
 * the tenant's recent ones) and visit types its form offers, the tenant's time zone, and the operator view of one tenant (what `npm run admin` shows for all
 * of them): its payer guards, its stuck checks and its queue. Always scoped to the calling tenant;
 * no patient data (no identifiers, names or CER text) in any of them.
 */
import type { CheckStore } from '../checks/store/check-store.js';
import { guardPayer } from '../checks/store/check-store.js';
import type { Tenant } from '../config.js';
import { DEFAULT_TIME_ZONE } from '../config.js';
import { OperationOutcomeError, outcome } from '../fhir/outcomes.js';
import type { Logger } from '../log.js';
import { safeLabel } from '../log.js';
import { frontDeskVisitTypes, knownPayers } from '../mapping/request/tables.js';
import { deskSlotsOf } from '../mapping/request/queue-place.js';
import { SERVICE_CATEGORY_SYSTEM } from '../mapping/response/codes.js';

export interface PayerOption {
  code: string;
  display: string;
}

export interface VisitTypeOption {
  /** The CoverageEligibilityRequest.item.category coding the form sends. */
  system: string;
  code: string;
  display: string;
  /** The category $estimate is asked about for this visit (service-category CodeSystem). */
  category: { system: string; code: string };
}

export interface OperatorView {
  tenant: string;
  guards: {
    payer: string;
    kind: 'credentials' | 'backoff';
    reason: string;
    openedAt: string;
    until: string | null;
  }[];
  stuck: {
    id: string;
    payer: string;
    state: string;
    upstreamStatus: string;
    createdAt: string;
    deadlineAt: string;
  }[];
  queues: {
    clinic: string;
    waiting: number;
    running: number;
    /** The line per class (docs/queue.md): desk work first, background work in what slots it may use. */
    desk: { waiting: number; running: number };
    background: { waiting: number; running: number };
    maxInFlight: number;
    /** Slots background work never holds. */
    deskSlots: number;
  }[];
}

/** How many of the tenant's newest checks are read for its recent payers. */
const RECENT_CHECKS = 50;
/** How many recent payers the form suggests. */
const RECENT_PAYERS = 5;

/**
 * The payers the form suggests: the known payers of mappings/payers.json, and the payer codes of
 * the tenant's newest checks (newest first, each once, any code: the contract passes every code
 * through). The form takes any other code too.
 */
export async function payerOptions(
  store: CheckStore,
  tenant: Tenant,
): Promise<{ payers: PayerOption[]; recent: string[] }> {
  const { checks } = await store.search(tenant.id, {}, { count: RECENT_CHECKS, offset: 0 });
  const recent = [
    ...new Set(checks.filter((c) => !c.isSearchAll).map((c) => c.payerCode.toUpperCase())),
  ].slice(0, RECENT_PAYERS);
  return { payers: knownPayers().map((p) => ({ code: p.code, display: p.display })), recent };
}

/** The visit types the form offers: `frontDesk` of mappings/visit-types.json, common first, each once. */
export function visitTypeOptions(): VisitTypeOption[] {
  return frontDeskVisitTypes().map(({ serviceCategory, ...v }) => ({
    ...v,
    category: { system: SERVICE_CATEGORY_SYSTEM, code: serviceCategory },
  }));
}

/**
 * What the page needs to know about the signed-in tenant: its id, the time zone it reads times
 * in, and how long kept documents stay (EVIDENCE_RETENTION_DAYS: "kept until", docs/evidence.md).
 */
export function deskSettings(
  tenant: Tenant,
  evidenceRetentionDays = 730,
): { tenant: string; timeZone: string; evidenceRetentionDays: number } {
  return { tenant: tenant.id, timeZone: tenant.timeZone ?? DEFAULT_TIME_ZONE, evidenceRetentionDays };
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** One tenant's guards, stuck checks and queue. */
export async function operatorView(store: CheckStore, tenant: Tenant, now: number): Promise<OperatorView> {
  const [guards, overdue, line] = await Promise.all([
    store.listGuards(),
    store.listOverdue(now),
    store.countQueueByClass(tenant.id),
  ]);
  return {
    tenant: tenant.id,
    guards: guards
      .filter((g) => g.tenantId === tenant.id)
      .map((g) => ({
        payer: g.payerCode,
        kind: g.kind,
        reason: g.reason,
        openedAt: iso(g.openedAt),
        until: g.until === null ? null : iso(g.until),
      })),
    stuck: overdue
      .filter((c) => c.tenantId === tenant.id)
      .map((c) => ({
        id: c.id,
        payer: c.payerCode,
        state: c.state,
        upstreamStatus: safeLabel(c.upstreamStatus),
        createdAt: iso(c.createdAt),
        deadlineAt: iso(c.deadlineAt),
      })),
    queues: [
      {
        clinic: tenant.id,
        waiting: line.desk.waiting + line.background.waiting,
        running: line.desk.running + line.background.running,
        desk: line.desk,
        background: line.background,
        maxInFlight: tenant.maxInFlight,
        deskSlots: deskSlotsOf(tenant.maxInFlight, tenant.deskSlots),
      },
    ],
  };
}

/**
 * Removes the tenant's guard on a payer after the clinic fixed its payer login (as `npm run admin
 * -- reset-guard` does), with the same audit line. 404 when the tenant has no guard on that payer.
 */
export async function resetGuard(
  store: CheckStore,
  tenant: Tenant,
  payer: string,
  logger: Logger,
): Promise<void> {
  const payerCode = guardPayer(payer);
  const removed = await store.deleteGuard(tenant.id, payerCode);
  logger.warn('audit: payer guard reset by operator', {
    tenantId: tenant.id,
    payerCode: safeLabel(payerCode),
    removed,
    via: 'front-desk page',
  });
  if (!removed)
    throw new OperationOutcomeError(
      outcome('not-found', 'No open guard for this payer', { expression: ['payer'] }),
      404,
    );
}
