/**
 * No cold start on the request path: the service answers /ready 200 only once the R4 definitions
 * are loaded, so the first $submit a deployment routes to it does not load them (and stall every
 * other request) while it is answered. Own file: the definitions must not be loaded when it starts.
 */
import request from 'supertest';
import { afterAll, expect, it } from 'vitest';
import { fhirDefinitionsLoaded } from '../../src/fhir/validator.js';
import { startServer } from '../../src/server.js';
import type { RunningServer } from '../../src/server.js';
import { startSandbox } from '../../src/sandbox/index.js';
import { captureLogger, testConfig, UPSTREAM_KEY } from '../support/harness.js';
import { until } from '../support/until.js';

let stop: (() => Promise<void>) | undefined;
afterAll(async () => {
  await stop?.();
});

it('/ready is 503 while the FHIR definitions load (/health answers meanwhile), then 200', async () => {
  expect(fhirDefinitionsLoaded()).toBe(false);
  const sandbox = await startSandbox({ port: 0, timeScale: 0.02, apiKeys: [UPSTREAM_KEY] });
  const server: RunningServer = await startServer(testConfig(sandbox.url), captureLogger().logger);
  stop = async () => {
    await server.stop();
    await sandbox.close();
  };
  const early = await request(server.url).get('/ready');
  expect(early.status).toBe(503);
  expect(early.body).toMatchObject({
    ready: false,
    checks: {
      store: { ok: true },
      upstream: { ok: true },
      definitions: { ok: false, detail: 'loading FHIR definitions' },
    },
  });
  expect((await request(server.url).get('/health')).status).toBe(200);
  // Loaded in the background, with no request asking for them.
  await until(
    async () => ((await request(server.url).get('/ready')).status === 200 ? true : undefined),
    30_000,
    '/ready',
  );
  expect(fhirDefinitionsLoaded()).toBe(true);
  expect((await request(server.url).get('/ready')).body).toMatchObject({
    ready: true,
    checks: { definitions: { ok: true } },
  });
});
