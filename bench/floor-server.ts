/**
 * The floor of figure 1 (bench/cost-floor.ts): the least a check costs with this design's parts,
 * without the service around them. A bare express 5 app takes the same `$submit` body and answers
 * it at once, then runs the check the way the service does, over the same HTTP: the real upstream
 * client (undici, the zod schemas) creates the task and polls it until its envelope is finished.
 * No store, no scheduler, no auth, security headers, rate limits, audit, logs or metrics.
 *
 * Modes (argv[2]):
 * - `node`: the exchanges of a check with node's own HTTP server (no express) answering `$submit`
 *   and the upstream client reading the upstream's answers;
 * - `http`: the same with express 5 (its JSON body parser) answering `$submit`;
 * - `required`: plus what every check must do besides storing it: the FHIR validation of the
 *   `$submit` body, the mapping of the envelope to a CER, and the CER's JSON text.
 *
 * Usage: tsx bench/floor-server.ts <http|required> <upstream base URL>; prints {"url": ...}.
 * GET /done answers how many checks have finished.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { isFinished } from '../src/upstream/contract.js';
import { UpstreamClient } from '../src/upstream/client.js';
import { loadFhirDefinitions } from '../src/fhir/validator.js';
import { readSubmitBody } from '../src/mapping/request/submit-body.js';
import { mapEnvelope } from '../src/mapping/response/index.js';
import type { CerContext } from '../src/mapping/types.js';
import { upstreamTaskRequest } from '../test/support/requests.js';

const mode = process.argv[2] === 'required' || process.argv[2] === 'node' ? process.argv[2] : 'http';
const client = new UpstreamClient({ baseUrl: process.argv[3] ?? '' });
const creds = {
  apiKey: process.env.TEST_UPSTREAM_KEY ?? '',
  clinicId: 'clinic-floor',
  clientId: 'EHR-1',
};
if (mode === 'required') loadFhirDefinitions();

let done = 0;
let failed = 0;

async function runCheck(request: unknown): Promise<void> {
  const created = await client.createTask(creds, upstreamTaskRequest('784-1990-0000001-0', Date.now()));
  if (!created.ok) throw new Error(`create-task failed: ${JSON.stringify(created.error)}`);
  for (;;) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const polled = await client.getResult(creds, created.value.task_id);
    if (!polled.ok) throw new Error(`poll failed: ${JSON.stringify(polled.error)}`);
    if (!isFinished(polled.value, false)) continue;
    if (mode === 'required') {
      const id = randomUUID();
      const ctx: CerContext = {
        checkId: id,
        patient: { reference: 'Patient/p1' },
        insurer: { identifier: { system: 'urn:payer', value: 'DAMAN' }, display: 'Daman' },
        request: { ...(request as object), id } as CerContext['request'],
        isSearchAll: false,
        baseUrl: 'http://localhost:8080',
        now: new Date().toISOString(),
      };
      if (JSON.stringify(mapEnvelope(polled.value, ctx)).length === 0) throw new Error('empty CER');
    }
    return;
  }
}

/** The check's start as the service's and express's routes do it: answer, then run the check. */
function accepted(body: unknown): void {
  runCheck(body).then(
    () => (done += 1),
    (error: unknown) => {
      failed += 1;
      process.stderr.write(`${String(error)}\n`);
    },
  );
}

if (mode === 'node') {
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/done') {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ done, failed }));
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
      res
        .writeHead(200, { 'content-type': 'application/fhir+json' })
        .end(JSON.stringify({ resourceType: 'Parameters' }));
      accepted(body);
    });
  });
  server.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as AddressInfo;
    process.stdout.write(`${JSON.stringify({ message: 'listening', url: `http://127.0.0.1:${port}` })}\n`);
  });
}

const app = express();
app.use(express.json({ type: ['application/json', 'application/fhir+json'], limit: '1mb' }));
app.post('/fhir/CoverageEligibilityRequest/\\$submit', (req, res) => {
  if (mode === 'required') readSubmitBody(req.body);
  res
    .status(200)
    .type('application/fhir+json')
    .send(JSON.stringify({ resourceType: 'Parameters' }));
  accepted(req.body);
});
app.get('/done', (_req, res) => {
  res.json({ done, failed });
});
if (mode !== 'node') {
  const server = app.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as AddressInfo;
    process.stdout.write(`${JSON.stringify({ message: 'listening', url: `http://127.0.0.1:${port}` })}\n`);
  });
}
