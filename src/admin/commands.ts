/**
 * Operator commands (npm run admin -- <command>; entry point src/admin/main.ts): payer-account guards and stuck checks.
 *
 *   guards                      list open guards
 *   reset-guard <tenant> <payer> remove a guard after the clinic fixed its payer credentials
 *   stuck                       checks past their timeout and not done
 *
 * Reads DATABASE_URL like the service. Every reset writes an audit log line and an AuditEvent.
 */
import type { CheckStore } from '../checks/store/check-store.js';
import { auditRow } from '../checks/store/audit-store.js';
import type { Logger } from '../log.js';
import { safeLabel } from '../log.js';

export interface AdminIo {
  out: (line: string) => void;
  logger: Logger;
  now: () => number;
}

/** Runs one admin command against a store; returns the process exit code. */
export async function runAdmin(store: CheckStore, args: string[], io: AdminIo): Promise<number> {
  const [command, ...rest] = args;
  switch (command) {
    case 'guards': {
      for (const g of await store.listGuards()) {
        const until = g.until === null ? 'until reset' : `until ${new Date(g.until).toISOString()}`;
        io.out(
          `${g.tenantId}\t${g.payerCode}\t${g.kind}\t${until}\topened ${new Date(g.openedAt).toISOString()}`,
        );
      }
      return 0;
    }
    case 'reset-guard': {
      const [tenantId, payerCode] = rest;
      if (!tenantId || !payerCode) {
        io.out('usage: reset-guard <tenant> <payer>');
        return 2;
      }
      const removed = await store.deleteGuard(tenantId, payerCode);
      io.logger.warn('audit: payer guard reset by operator', { tenantId, payerCode, removed });
      // The tenant's audit trail too (docs/auth.md): an AuditEvent with the operator as agent.
      await store.insertAuditEvents([
        auditRow(
          {
            tenantId,
            agentId: 'operator',
            agentKind: 'operator',
            action: 'D',
            interaction: 'delete',
            operation: 'guard-reset',
            outcome: removed ? '0' : '4',
            ...(removed ? {} : { outcomeDesc: 'no guard was open' }),
          },
          io.now(),
        ),
      ]);
      io.out(
        removed ? `guard removed for ${tenantId} ${payerCode}` : `no guard for ${tenantId} ${payerCode}`,
      );
      return removed ? 0 : 1;
    }
    case 'stuck': {
      const now = io.now();
      for (const check of await store.listOverdue(now)) {
        io.out(
          `${check.tenantId}\t${check.id}\t${check.state}\t${safeLabel(check.upstreamStatus)}\tdeadline ${new Date(check.deadlineAt).toISOString()}`,
        );
      }
      return 0;
    }
    default:
      io.out('usage: admin guards | reset-guard <tenant> <payer> | stuck');
      return 2;
  }
}
