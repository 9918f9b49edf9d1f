/**
 * The small JSON answers of the front-desk page (/app/, docs/front-desk.md): the payers and visit
 * types its form offers, and the operator view of one tenant (what `npm run admin` shows for all
 * of them): its payer guards, its stuck checks and its queue. Always scoped to the calling tenant;
 * no patient data (no identifiers, names or CER text) in any of them.
 */
import type { CheckStore } from '../checks/store/check-store.js';
import { SLOT_STATES, guardPayer } from '../checks/store/check-store.js';
import type { Tenant } from '../config.js';
import { OperationOutcomeError, outcome } from '../fhir/outcomes.js';
import type { Logger } from '../log.js';
import { safeLabel } from '../log.js';
import { knownPayers, visitTypeGroups } from '../mapping/request/tables.js';

export interface PayerOption {
  code: string;
  display: string;
}

export interface VisitTypeOption {
  /** The CoverageEligibilityRequest.item.category coding the form sends. */
  system: string;
  code: string;
  display: string;
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
  queues: { clinic: string; waiting: number; running: number }[];
}

/** The payers the form offers: the known payers of mappings/payers.json (any other code still works over FHIR). */
export function payerOptions(): PayerOption[] {
  return knownPayers().map((p) => ({ code: p.code, display: p.display }));
}

/** The visit types the form offers: the rows of mappings/visit-types.json. */
export function visitTypeOptions(): VisitTypeOption[] {
  return visitTypeGroups().flatMap((group) =>
    group.element.map((e) => ({ system: group.source, code: e.code, display: e.display ?? e.title })),
  );
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** One tenant's guards, stuck checks and queue. */
export async function operatorView(store: CheckStore, tenant: Tenant, now: number): Promise<OperatorView> {
  const [guards, overdue, counts] = await Promise.all([
    store.listGuards(),
    store.listOverdue(now),
    store.countByState(),
  ]);
  const mine = counts.filter((c) => c.tenantId === tenant.id);
  const count = (states: readonly string[]) =>
    mine.filter((c) => states.includes(c.state)).reduce((sum, c) => sum + c.count, 0);
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
    queues: [{ clinic: tenant.id, waiting: count(['waiting']), running: count(SLOT_STATES) }],
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
