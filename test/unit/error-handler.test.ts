/**
 * The 500 path of the one error handler: an unknown failure becomes an `exception`
 * OperationOutcome that names the request id, is valid FHIR, and carries no stack trace or
 * source path; the error itself is logged once, server-side, with the request id.
 */
import { PassThrough } from 'node:stream';
import express from 'express';
import request from 'supertest';
import { Client } from 'undici';
import { describe, expect, it } from 'vitest';
import { errorHandler } from '../../src/http/fhir-json.js';
import { requestId } from '../../src/http/middleware.js';
import { createLogger } from '../../src/log.js';
import { expectValidFhir } from '../support/fhir.js';

interface Outcome {
  resourceType: string;
  issue: { severity: string; code: string; diagnostics?: string; details?: { text?: string } }[];
}

function appThatThrows() {
  const stream = new PassThrough();
  const logs: string[] = [];
  stream.on('data', (chunk: Buffer) => logs.push(...chunk.toString('utf8').split('\n').filter(Boolean)));
  const app = express();
  app.use(requestId);
  app.get('/x', () => {
    throw new Error('boom at /x.ts:1');
  });
  app.get('/async', async () => {
    await Promise.resolve();
    throw new Error('async boom at /y.ts:2');
  });
  // Headers and half a body are out, then the handler fails.
  app.get('/half', (_req, res, next) => {
    res.writeHead(200, { 'Content-Type': 'application/fhir+json' });
    res.write('{"resourceType":"Bundle",');
    setImmediate(() => next(new Error('failed mid-answer')));
  });
  app.use(errorHandler(createLogger('debug', stream)));
  return { app, logs };
}

function expectServerErrorOutcome(res: request.Response, id: string, message: string): void {
  expect(res.status).toBe(500);
  expect(String(res.headers['content-type'])).toMatch(/^application\/fhir\+json/);
  expect(res.headers['x-request-id']).toBe(id);
  expectValidFhir(res.body);
  const outcome = res.body as Outcome;
  expect(outcome.resourceType).toBe('OperationOutcome');
  expect(outcome.issue[0]?.severity).toBe('error');
  expect(outcome.issue[0]?.code).toBe('exception');
  const text = `${outcome.issue[0]?.details?.text ?? ''} ${outcome.issue[0]?.diagnostics ?? ''}`;
  expect(text).toContain(id);
  // Neither the message nor the stack of the thrown error reaches the client.
  expect(res.text).not.toContain(message);
  expect(res.text).not.toContain('boom');
  expect(res.text).not.toContain('    at ');
  expect(res.text).not.toContain('.ts:');
  expect(res.text).not.toContain('Error:');
}

describe('errorHandler: unknown errors -> 500 OperationOutcome', () => {
  it('a route that throws answers 500 exception naming the request id, without a stack', async () => {
    const { app, logs } = appThatThrows();
    const id = 'req-500-unit-1';
    const res = await request(app).get('/x').set('X-Request-Id', id);
    expectServerErrorOutcome(res, id, 'boom at /x.ts:1');
    // Logged once for the operator, with the same request id.
    const logged = logs.filter((l) => l.includes('unhandled error'));
    expect(logged).toHaveLength(1);
    expect(logged[0]).toContain(id);
  });

  it('a rejected async handler takes the same path', async () => {
    const { app } = appThatThrows();
    const id = 'req-500-unit-2';
    const res = await request(app).get('/async').set('X-Request-Id', id);
    expectServerErrorOutcome(res, id, 'async boom at /y.ts:2');
  });

  it('without X-Request-Id the generated id is the one echoed and quoted', async () => {
    const { app } = appThatThrows();
    const res = await request(app).get('/x');
    expect(res.status).toBe(500);
    expectValidFhir(res.body);
    const id = String(res.headers['x-request-id']);
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect((res.body as Outcome).issue[0]?.details?.text).toContain(id);
  });
});

describe('errorHandler: an error after the answer began', () => {
  it('closes the connection, so a kept-alive client never reads a cut-off answer as complete', async () => {
    const { app } = appThatThrows();
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    const { port } = server.address() as { port: number };
    const client = new Client(`http://127.0.0.1:${port}`);
    try {
      await expect(
        client.request({ path: '/half', method: 'GET' }).then((res) => res.body.text()),
      ).rejects.toMatchObject({
        code: 'UND_ERR_SOCKET',
      });
      // The same client goes on, on a new connection.
      const next = await client.request({ path: '/x', method: 'GET' });
      await next.body.text();
      expect(next.statusCode).toBe(500);
    } finally {
      await client.close();
      server.close();
    }
  });
});
