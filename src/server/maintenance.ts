/**
 * A replica's housekeeping off the request path: the retention purge (hourly, the first a minute
 * after start) and the FHIR definitions loaded once at start, then one full collection.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import type { CheckStore } from '../checks/store/check-store.js';
import type { SessionStore } from '../checks/store/session-store.js';
import { isStoreUnavailable } from '../checks/store/outage.js';
import { warmFhirDefinitions } from '../fhir/validator.js';

/** Starts the housekeeping; the function returned stops it. */
export function startMaintenance(
  config: Config,
  logger: Logger,
  store: CheckStore & { sessions?: SessionStore },
  now: () => number,
): () => void {
  // Retention: finished checks older than RETENTION_DAYS are deleted (hourly), but for those with
  // kept documents, which go after EVIDENCE_RETENTION_DAYS.
  // An hourly purge that meets a store outage tries again next hour: a warning, not an error.
  const purgeFailed = (what: string, error: unknown) =>
    isStoreUnavailable(error)
      ? logger.warn(`${what} skipped: the store is unavailable`, { kind: error.kind })
      : logger.error(`${what} failed`, { error });
  const evidenceDays = config.evidenceRetentionDays ?? 730;
  const purge = () => {
    // A check with kept documents stays EVIDENCE_RETENTION_DAYS, its CER with them (docs/evidence.md).
    const at = now();
    store.purgeBefore(at - config.retentionDays * 86_400_000, at - evidenceDays * 86_400_000).then(
      (count: number) => {
        if (count > 0) logger.info('retention purge', { purged: count, retentionDays: config.retentionDays });
      },
      (error: unknown) => purgeFailed('retention purge', error),
    );
    store
      .purgeAuditBefore(now() - config.retentionDays * 86_400_000)
      .catch((error: unknown) => purgeFailed('audit retention purge', error));
    // Ended page sessions (docs/signin.md): a read refuses them anyway; this only frees the rows.
    store.sessions
      ?.purgeSessions(now(), config.sessionIdleMinutes * 60_000)
      .catch((error: unknown) => purgeFailed('session purge', error));
  };
  // Not on the start-up path: the first purge a minute after start, then hourly.
  const firstPurge = setTimeout(purge, 60_000);
  firstPurge.unref();
  const purgeTimer = setInterval(purge, 3_600_000);
  purgeTimer.unref();
  // Loading them takes about a second of CPU: done at once, in steps, so /health and the scheduler
  // keep answering; /ready answers 200 only once they are loaded (a $submit before then finishes
  // the load itself). Then one full collection: the load leaves about 85 MB of garbage (the parsed
  // definition files), and a burst of $submit arriving on top of it ran RSS to 450-470 MB, against
  // 285-320 MB after the collection (bench/README.md, figure 3).
  const warmUp = setTimeout(() => {
    warmFhirDefinitions()
      .then(collectGarbage)
      .catch((error: unknown) => logger.error('loading FHIR definitions failed', { error }));
  }, 0);
  warmUp.unref();
  return () => {
    clearInterval(purgeTimer);
    clearTimeout(firstPurge);
    clearTimeout(warmUp);
  };
}

/**
 * One full garbage collection, now. V8 exposes `gc` only with --expose-gc; set at run time, the
 * flag makes `gc` a global of contexts created afterwards, so a new context hands it over (the
 * way jest-leak-detector does). The flag stays on for this process: nothing else calls gc.
 */
export function collectGarbage(): void {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as unknown;
  if (typeof gc === 'function') (gc as () => void)();
}
