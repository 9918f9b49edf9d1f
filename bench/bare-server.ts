/**
 * The baseline of the read-path benchmark: a bare express 5 app that serves the same CER bytes
 * from memory. Usage: tsx bench/bare-server.ts <file> ; prints {"url": ...} on stdout.
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import express from 'express';

const body = readFileSync(process.argv[2] ?? '', 'utf8');
const app = express();
app.get('/fhir/CoverageEligibilityResponse/:id', (_req, res) => {
  res.type('application/fhir+json').send(body);
});
const server = app.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as AddressInfo;
  process.stdout.write(`${JSON.stringify({ message: 'listening', url: `http://127.0.0.1:${port}` })}\n`);
});
