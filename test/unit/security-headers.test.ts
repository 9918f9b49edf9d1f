/**
 * The security headers recorded once at start-up (src/http/security-headers.ts) are the ones
 * helmet itself sets on an answer.
 */
import express from 'express';
import helmet from 'helmet';
import request from 'supertest';
import { describe, expect, it } from 'vitest';
import { SECURITY_HEADERS, securityHeaders } from '../../src/http/security-headers.js';

function appWith(middleware: express.RequestHandler) {
  const app = express();
  app.disable('x-powered-by');
  app.use(middleware);
  app.get('/', (_req, res) => {
    res.send('ok');
  });
  return app;
}

describe('security headers', () => {
  it('are what helmet sets, with the CSP default-src none', async () => {
    const withHelmet = await request(
      appWith(helmet({ contentSecurityPolicy: { directives: { defaultSrc: ["'none'"] } } })),
    ).get('/');
    const recorded = await request(appWith(securityHeaders)).get('/');
    expect(recorded.headers).toEqual({ ...withHelmet.headers, date: recorded.headers.date });
    expect(recorded.headers['content-security-policy']).toMatch(/^default-src 'none'(;|$)/);
    expect(SECURITY_HEADERS.length).toBeGreaterThanOrEqual(10);
  });
});
