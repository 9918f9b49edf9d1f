/**
 * The layers of src/ (docs/architecture.md), enforced by `npm run lint:layers` in `npm run check`.
 * Each layer imports only the layers below it:
 *
 *   main.ts, server.ts   composition root (server.ts a list of builders in server/)
 *   http/                express shell
 *   operations/          one file per FHIR interaction or operation; metrics.ts beside it
 *   notifications/       subscription notifications: the delivery worker, the Bundles (issue 15)
 *   checks/              lifecycle, scheduler, service, store/
 *   mapping/             request/, response/, conformance/ (pure)
 *   ground               fhir/ (the FHIR kit), upstream/ (client, contract, port), config.ts, log.ts
 *
 * Beside them: sandbox/ (its own program: it imports no layer) and admin/ (the operator command:
 * it uses the store, nothing above it).
 */
const ground = '^src/(fhir|upstream|ehr)/|^src/(config|log)\\.ts$';
const mapping = '^src/mapping/';
const checks = '^src/checks/';
const notifications = '^src/notifications/';
const operations = '^src/operations/|^src/metrics\\.ts$';
const http = '^src/http/';
const root = '^src/(main|server)\\.ts$|^src/server/';

/** A rule: modules matching `from` import nothing matching `to`. */
const forbid = (name, from, to, comment) => ({
  name,
  comment,
  severity: 'error',
  from: { path: from },
  to: { path: to },
});

module.exports = {
  forbidden: [
    forbid(
      'ground-imports-up',
      ground,
      [mapping, checks, notifications, operations, http, root, '^src/(sandbox|admin)/'],
      'The FHIR kit, the upstream contract and client, config and log are the ground: they import no layer above.',
    ),
    forbid(
      'ground-is-flat',
      '^src/fhir/',
      '^src/upstream/',
      'The FHIR kit and the upstream side of the ground do not know each other.',
    ),
    forbid(
      'ground-is-flat-too',
      '^src/upstream/',
      '^src/fhir/',
      'The FHIR kit and the upstream side of the ground do not know each other.',
    ),
    forbid(
      'mapping-imports-up',
      mapping,
      [checks, notifications, operations, http, root, '^src/(sandbox|admin)/'],
      'Mapping is pure: FHIR <-> upstream, no store, no operation.',
    ),
    forbid(
      'checks-import-up',
      checks,
      [notifications, operations, http, root, '^src/(sandbox|admin)/'],
      'The check lifecycle knows nothing of FHIR interactions or HTTP.',
    ),
    forbid(
      'notifications-import-up',
      notifications,
      [operations, http, root, '^src/(sandbox|admin)/'],
      'Notifications (worker, Bundles) sit on the store: they know nothing of the FHIR routes or express.',
    ),
    forbid(
      'operations-import-up',
      operations,
      [http, root, '^src/(sandbox|admin)/'],
      'Operations know nothing of express.',
    ),
    forbid(
      'http-imports-root',
      http,
      [root, '^src/(sandbox|admin)/'],
      'The express shell is built by the composition root, not the reverse.',
    ),
    forbid(
      'sandbox-is-apart',
      '^src/sandbox/',
      '^src/(?!sandbox/)',
      'The sandbox upstream is its own program: it imports nothing of the adapter.',
    ),
    forbid(
      'admin-uses-the-store',
      '^src/admin/',
      [mapping, notifications, operations, http, root, '^src/sandbox/', '^src/checks/(?!store/)'],
      'The operator command works on the store only.',
    ),
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No import circles, inside a layer either.',
      from: { path: '^src/' },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
