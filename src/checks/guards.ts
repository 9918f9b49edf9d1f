/**
 * Payer-account guards: after an upstream outcome that says the clinic's credentials were refused
 * (invalid_credentials) or the portal asks to back off, no upstream call is made for that tenant
 * and payer until the guard closes (backoff) or an operator resets it (credentials): a retry loop
 * would lock the clinic's payer account (docs/upstream.md, "Outcomes and what the adapter does
 * with each"; docs/lifecycle.md).
 */
import type { Logger } from '../log.js';
import { guardOf, outcomeRuleFor } from '../mapping/response/index.js';
import type { Envelope } from '../upstream/contract.js';
import { safeLabel } from '../log.js';
import type { Check, CheckStore, Guard } from './store/check-store.js';
import { guardPayer } from './store/check-store.js';

/** What opening a guard needs: narrow, so the lifecycle hands its own deps without a circle. */
export interface GuardDeps {
  store: Pick<CheckStore, 'putGuard'>;
  logger: Logger;
  now: () => number;
  /** How long a payer backoff guard stays open at least. */
  backoffGuardMs: number;
}

type GuardedCheck = Pick<Check, 'id' | 'tenantId' | 'payerCode'>;

/** The adapter error of a check refused by an open guard, or undefined when none is open. */
export function guardRefusal(
  guard: Guard | null,
  now: number,
): 'credentials-guard' | 'backoff-guard' | undefined {
  if (!guard || (guard.until !== null && guard.until <= now)) return undefined;
  return guard.kind === 'credentials' ? 'credentials-guard' : 'backoff-guard';
}

export async function openGuard(
  check: GuardedCheck,
  deps: GuardDeps,
  kind: 'credentials' | 'backoff',
  envelope: Envelope,
  payerCode: string = check.payerCode,
) {
  const now = deps.now();
  const retryAfterMs = (outcomeRuleFor(envelope).retryAfterSeconds ?? 0) * 1000;
  const payer = guardPayer(payerCode);
  await deps.store.putGuard({
    tenantId: check.tenantId,
    payerCode: payer,
    kind,
    until: kind === 'credentials' ? null : now + Math.max(retryAfterMs, deps.backoffGuardMs),
    reason: `upstream outcome ${kind === 'credentials' ? 'invalid_credentials' : 'backoff'} on check ${check.id}`,
    openedAt: now,
  });
  deps.logger.warn('payer guard opened', { tenantId: check.tenantId, payerCode: payer, kind });
}

/**
 * A search-all logs in at every payer: a payer that answered invalid_credentials or backoff
 * there gets the same guard as after a single-payer check, so the clinic's next checks with that
 * payer do not log in again (repeated failures lock the payer account, docs/upstream.md).
 */
export async function openSearchAllGuards(check: GuardedCheck, deps: GuardDeps, envelope: Envelope) {
  for (const entry of envelope.aggregated_results ?? []) {
    const kind = guardOf(entry.status);
    const payer = entry.tpa_name ?? entry.tpa ?? entry.data?.adjusted_tpa_name;
    // A payer code (guard key, log field, admin column), never free text.
    if (kind && payer && safeLabel(payer.trim()) !== 'other')
      await openGuard(check, deps, kind, envelope, payer);
  }
}
