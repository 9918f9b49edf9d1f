/**
 * Bad input of every kind gets a 4xx OperationOutcome with issue.expression (or a 404/401/413
 * OperationOutcome for routing, auth and size), never a 500, and nothing stored is lost.
 */
import request from 'supertest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectValidFhir } from '../support/fhir.js';
import type { Harness } from '../support/harness.js';
import { startHarness } from '../support/harness.js';
import { eligibilityRequest } from '../support/requests.js';

const SUBMIT = '/fhir/CoverageEligibilityRequest/$submit';
const FHIR_JSON = 'application/fhir+json';

let h: Harness;

beforeAll(async () => {
  h = await startHarness();
});
afterAll(async () => {
  await h.stop();
});

interface Outcome {
  resourceType: string;
  issue: { severity: string; code: string; expression?: string[]; details?: { text?: string } }[];
}

function expectOutcome(body: unknown, status: number, expected: { code?: string; expression?: string }) {
  expectValidFhir(body);
  const outcome = body as Outcome;
  expect(outcome.resourceType, `status ${status}`).toBe('OperationOutcome');
  const issue = outcome.issue[0];
  if (expected.code) expect(issue?.code).toBe(expected.code);
  if (expected.expression)
    expect(outcome.issue.flatMap((i) => i.expression ?? [])).toContain(expected.expression);
}

describe('bad input to $submit', () => {
  it('malformed JSON -> 400 structure', async () => {
    const res = await request(h.url)
      .post(SUBMIT)
      .set(h.auth)
      .set('Content-Type', FHIR_JSON)
      .send('{"resourceType":');
    expect(res.status).toBe(400);
    expectOutcome(res.body, 400, { code: 'structure' });
  });

  it('not a FHIR content type -> 415', async () => {
    const res = await request(h.url).post(SUBMIT).set(h.auth).set('Content-Type', 'text/plain').send('hello');
    expect(res.status).toBe(415);
    expectOutcome(res.body, 415, {});
  });

  it('a JSON array, a number, null -> 400 with expression', async () => {
    for (const body of ['[]', '42', 'null', '"text"']) {
      const res = await request(h.url).post(SUBMIT).set(h.auth).set('Content-Type', FHIR_JSON).send(body);
      expect(res.status, body).toBeGreaterThanOrEqual(400);
      expect(res.status, body).toBeLessThan(500);
      expectOutcome(res.body, res.status, {});
    }
  });

  it('wrong resourceType -> 400 naming resourceType', async () => {
    const res = await request(h.url)
      .post(SUBMIT)
      .set(h.auth)
      .set('Content-Type', FHIR_JSON)
      .send({ resourceType: 'Patient', id: 'x' });
    expect(res.status).toBe(400);
    const expressions = (res.body as Outcome).issue.flatMap((i) => i.expression ?? []);
    expect(expressions.length).toBeGreaterThan(0);
  });

  it('wrong types inside a request -> 400 with the validator issue expression', async () => {
    const body = { ...eligibilityRequest(), created: 12345, status: 'bogus' };
    const res = await request(h.url).post(SUBMIT).set(h.auth).set('Content-Type', FHIR_JSON).send(body);
    expect(res.status).toBe(400);
    const expressions = (res.body as Outcome).issue.flatMap((i) => i.expression ?? []).join(' ');
    expect(expressions).toContain('status');
  });

  it('missing patient identifier -> 422 naming the patient', async () => {
    const body = eligibilityRequest();
    const patient = body.contained?.[0] as { identifier?: unknown };
    delete patient.identifier;
    const res = await request(h.url).post(SUBMIT).set(h.auth).set('Content-Type', FHIR_JSON).send(body);
    expect(res.status).toBe(422);
    const expressions = (res.body as Outcome).issue.flatMap((i) => i.expression ?? []).join(' ');
    // The contained Patient's identifier, the element that is missing.
    expect(expressions).toContain('CoverageEligibilityRequest.contained[0].identifier');
  });

  it('unknown payer code -> 422 naming the insurer (passed through; the clinic has no credentials for it)', async () => {
    const res = await request(h.url)
      .post(SUBMIT)
      .set(h.auth)
      .set('Content-Type', FHIR_JSON)
      .send(eligibilityRequest({ payer: 'NO-SUCH-PAYER' }));
    expect(res.status).toBe(422);
    expectOutcome(res.body, 422, { expression: 'CoverageEligibilityRequest.insurer' });
  });

  it('objects where strings belong, and deep nesting under the size limit -> 400, never 500', async () => {
    const objectReference = { ...eligibilityRequest(), patient: { reference: {} } };
    const res = await request(h.url)
      .post(SUBMIT)
      .set(h.auth)
      .set('Content-Type', FHIR_JSON)
      .send(objectReference);
    expect(res.status).toBe(400);
    expectOutcome(res.body, 400, { expression: 'CoverageEligibilityRequest.patient.reference' });
    // 20,000 nested extensions (about 0.7 MB), written as text: too deep for recursive code.
    const depth = 20_000;
    const deep = `${'{"url":"http://x","extension":['.repeat(depth)}{"url":"http://x","valueString":"x"}${']}'.repeat(depth)}`;
    const body = JSON.stringify(eligibilityRequest()).replace(/^\{/, `{"extension":[${deep}],`);
    const nested = await request(h.url).post(SUBMIT).set(h.auth).set('Content-Type', FHIR_JSON).send(body);
    expect(nested.status).toBe(400);
    expectOutcome(nested.body, 400, {});
  });

  it('huge body -> 413 OperationOutcome', async () => {
    const body = {
      ...eligibilityRequest(),
      text: { status: 'generated', div: `<div>${'x'.repeat(11 * 1024 * 1024)}</div>` },
    };
    const res = await request(h.url).post(SUBMIT).set(h.auth).set('Content-Type', FHIR_JSON).send(body);
    expect(res.status).toBe(413);
    expectOutcome(res.body, 413, {});
  });

  it('no API key -> 401, wrong key -> 401, never a 500', async () => {
    const none = await request(h.url).post(SUBMIT).set('Content-Type', FHIR_JSON).send(eligibilityRequest());
    expect(none.status).toBe(401);
    expectOutcome(none.body, 401, { code: 'login' });
    expect(String(none.headers['www-authenticate'])).toMatch(/^Bearer\b/);
    const wrong = await request(h.url)
      .post(SUBMIT)
      .set('Authorization', 'Bearer nope')
      .set('Content-Type', FHIR_JSON)
      .send(eligibilityRequest());
    expect(wrong.status).toBe(401);
    expectOutcome(wrong.body, 401, { code: 'login' });
    expect(String(wrong.headers['www-authenticate'])).toMatch(/^Bearer\b/);
    // A read without a key is challenged the same way.
    const read = await request(h.url).get('/fhir/CoverageEligibilityResponse/any-id');
    expect(read.status).toBe(401);
    expectOutcome(read.body, 401, { code: 'login' });
    expect(String(read.headers['www-authenticate'])).toMatch(/^Bearer\b/);
  });

  it('unknown route -> 404 not-found, unknown id -> 404', async () => {
    const route = await request(h.url).get('/fhir/Nope/1').set(h.auth);
    expect(route.status).toBe(404);
    expectOutcome(route.body, 404, { code: 'not-found' });
    const id = await request(h.url).get('/fhir/CoverageEligibilityResponse/does-not-exist').set(h.auth);
    expect(id.status).toBe(404);
    expectOutcome(id.body, 404, { code: 'not-found' });
    const badId = await request(h.url)
      .get(`/fhir/CoverageEligibilityResponse/${'%2e'.repeat(3)}`)
      .set(h.auth);
    expect(badId.status).toBe(404);
  });

  it('bad search parameters -> 400 with expression, never 500', async () => {
    const res = await request(h.url)
      .get('/fhir/CoverageEligibilityResponse?_count=abc&outcome=nope')
      .set(h.auth);
    expect(res.status).toBe(400);
    expectOutcome(res.body, 400, {});
  });

  it('nothing already stored is lost after a storm of bad input', async () => {
    const good = await request(h.url)
      .post(SUBMIT)
      .set(h.auth)
      .set('Content-Type', FHIR_JSON)
      .send(eligibilityRequest());
    expect(good.status).toBe(200);
    const location = String(good.headers.location);
    for (const body of ['{', '[]', '{"resourceType":"CoverageEligibilityRequest"}']) {
      await request(h.url).post(SUBMIT).set(h.auth).set('Content-Type', FHIR_JSON).send(body);
    }
    const again = await request(h.url).get(new URL(location).pathname).set(h.auth);
    expect(again.status).toBe(200);
    expect((again.body as { id: string }).id).toBe((good.body as { id: string }).id);
  });
});

/** Posts a body as FHIR JSON; returns the status, the parsed body and the answer's size in bytes. */
async function submitRaw(body: unknown): Promise<{ status: number; body: Outcome; bytes: number }> {
  const res = await request(h.url)
    .post(SUBMIT)
    .set(h.auth)
    .set('Content-Type', FHIR_JSON)
    .send(typeof body === 'string' ? body : JSON.stringify(body));
  return { status: res.status, body: res.body as Outcome, bytes: Buffer.byteLength(res.text) };
}

describe('hostile input costs nothing: small, valid answers', () => {
  // Reproduction 1: a string where a Reference belongs was read character by character
  // (70,000 issues, 10.9 MB); at 300,000 characters the stack overflowed (500).
  it.each([
    ['insurer', 70_000],
    ['provider', 70_000],
    ['patient', 70_000],
    ['insurer', 60_000],
    ['patient', 60_000],
    ['insurer', 300_000],
  ])('%s as a %i-character string -> 400 with one issue at that element', async (element, length) => {
    const res = await submitRaw({ ...eligibilityRequest(), [element]: 'x'.repeat(length) });
    expect(res.status).toBe(400);
    expectOutcome(res.body, 400, { expression: `CoverageEligibilityRequest.${element}` });
    expect(res.body.issue).toHaveLength(1);
    expect(res.bytes).toBeLessThan(1000);
  });

  it('a number, an array or a boolean where a Reference belongs -> 400 naming it', async () => {
    for (const value of [5, [{ reference: '#payer' }], true]) {
      const res = await submitRaw({ ...eligibilityRequest(), insurer: value });
      expect(res.status, JSON.stringify(value)).toBe(400);
      expectOutcome(res.body, 400, { expression: 'CoverageEligibilityRequest.insurer' });
    }
  });

  // Reproduction 2: a wrong status value came back whole in details.text.
  it.each([70_000, 5_000])('a wrong %i-character status is not echoed back whole', async (length) => {
    const res = await submitRaw({ ...eligibilityRequest(), status: 's'.repeat(length) });
    expect(res.status).toBe(400);
    expectOutcome(res.body, 400, { expression: 'CoverageEligibilityRequest.status' });
    expect(res.bytes).toBeLessThan(1000);
    expect(JSON.stringify(res.body)).not.toContain('s'.repeat(50));
  });

  // Reproduction 3: input text copied unchanged into an answer made it invalid FHIR.
  it.each([
    ['a control character', 'bo\u0000gus\u0007'],
    ['a lone surrogate', 'x\ud800y'],
    ['only white space', '\u00a0 \t'],
    ['an escape sequence', '\u001b[31mred'],
  ])('a wrong status holding %s -> a valid OperationOutcome', async (_what, status) => {
    const res = await submitRaw({ ...eligibilityRequest(), status });
    expect(res.status).toBe(400);
    expectOutcome(res.body, 400, { expression: 'CoverageEligibilityRequest.status' });
  });

  it('the same for a wrong resourceType and Bundle.type, which are echoed', async () => {
    const wrongType = await submitRaw({ resourceType: `Pat\u0000ient${'x'.repeat(5000)}` });
    expect(wrongType.status).toBe(400);
    expectOutcome(wrongType.body, 400, { expression: 'resourceType' });
    expect(wrongType.bytes).toBeLessThan(1000);
    const bundle = await submitRaw({ resourceType: 'Bundle', type: `\u0001${'t'.repeat(5000)}` });
    expect(bundle.status).toBe(400);
    expectOutcome(bundle.body, 400, { expression: 'Bundle.type' });
    expect(bundle.bytes).toBeLessThan(1000);
  });

  it('an invalid Emirates ID is named by its element, never repeated (it is patient data)', async () => {
    const res = await submitRaw(eligibilityRequest({ emiratesId: '784-1990-99887' }));
    expect(res.status).toBe(422);
    expectOutcome(res.body, 422, { expression: 'CoverageEligibilityRequest.contained[0].identifier[0]' });
    expect(JSON.stringify(res.body)).not.toContain('99887');
  });

  it('a reference holding an identifier is never repeated, by the mapper or the validator', async () => {
    const inQuery = await submitRaw({
      ...eligibilityRequest(),
      patient: { reference: 'Patient?identifier=784198712345671' },
    });
    expect(inQuery.status).toBe(422);
    expectOutcome(inQuery.body, 422, { expression: 'CoverageEligibilityRequest.patient' });
    expect(JSON.stringify(inQuery.body)).not.toContain('784198712345671');
    // medplum warns "Invalid reference: got <value>"; sent back with any error of the body.
    const asValue = await submitRaw({
      ...eligibilityRequest(),
      status: 'bogus',
      patient: { reference: '784-1987-1234567-1' },
    });
    expect(asValue.status).toBe(400);
    expectOutcome(asValue.body, 400, {});
    expect(JSON.stringify(asValue.body)).not.toContain('1234567');
  });

  it('a lone surrogate in a string is refused at its path, never stored and served back', async () => {
    const request = eligibilityRequest();
    const patient = request.contained?.[0] as { name?: { family?: string }[] };
    patient.name = [{ family: 'Te\ud800st' }];
    const res = await submitRaw(request);
    expect(res.status).toBe(400);
    expectOutcome(res.body, 400, {
      code: 'structure',
      expression: 'CoverageEligibilityRequest.contained[0].name[0].family',
    });
  });

  it('at most 100 issues; the last says how many were left out', async () => {
    const unknown = Object.fromEntries(Array.from({ length: 250 }, (_, i) => [`unknown${i}`, i]));
    const res = await submitRaw({ ...eligibilityRequest(), ...unknown });
    expect(res.status).toBe(400);
    expectOutcome(res.body, 400, {});
    expect(res.body.issue).toHaveLength(100);
    expect(res.body.issue[99]?.details?.text).toBe('151 more issues were left out');
    expect(res.body.issue[99]?.code).toBe('too-costly');
  });
});

describe('input limits, checked before the work', () => {
  it('nesting deeper than 32 -> 400 before parsing, however deep', async () => {
    for (const depth of [33, 100_000]) {
      const res = await submitRaw(
        `{"resourceType":"CoverageEligibilityRequest","x":${'['.repeat(depth)}${']'.repeat(depth)}}`,
      );
      expect(res.status, String(depth)).toBe(400);
      expectOutcome(res.body, 400, { code: 'structure', expression: '$this' });
      expect(res.body.issue[0]?.details?.text).toContain('32 levels');
    }
  });

  it('brackets inside strings do not count as nesting', async () => {
    const res = await submitRaw({
      ...eligibilityRequest(),
      text: undefined,
      implicitRules: '[[[['.repeat(20),
    });
    // Accepted: the text check alone also passes a 500, or a 400 for another reason.
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expectValidFhir(res.body);
    expect(res.body.issue?.[0]?.details?.text ?? '').not.toContain('levels');
  });

  it('an array of more than 1000 items -> 400 too-costly at that array', async () => {
    const res = await submitRaw({
      ...eligibilityRequest(),
      purpose: Array.from({ length: 1001 }, () => 'benefits'),
    });
    expect(res.status).toBe(400);
    expectOutcome(res.body, 400, { code: 'too-costly', expression: 'CoverageEligibilityRequest.purpose' });
  });

  it('a string longer than 64 K characters -> 400 too-costly at that string', async () => {
    const res = await submitRaw({ ...eligibilityRequest(), created: '2'.repeat(70_000) });
    expect(res.status).toBe(400);
    expectOutcome(res.body, 400, { code: 'too-costly', expression: 'CoverageEligibilityRequest.created' });
  });

  it('a property name that is no FHIR element name -> 400 at its object, the name not repeated', async () => {
    for (const key of ['__proto__', 'a b', 'k'.repeat(100), '']) {
      const body = `{"resourceType":"CoverageEligibilityRequest","insurer":{${JSON.stringify(key)}:{"a":1}}}`;
      const res = await submitRaw(body);
      expect(res.status, key).toBe(400);
      expectOutcome(res.body, 400, { code: 'structure', expression: 'CoverageEligibilityRequest.insurer' });
      if (key.length > 3) expect(JSON.stringify(res.body)).not.toContain(key);
    }
  });
});

describe('charsets', () => {
  it('FHIR JSON is UTF-8: a body in another charset is 415 before it is read', async () => {
    for (const charset of ['utf-16le', 'utf-16', 'utf-7', 'latin1']) {
      const res = await request(h.url)
        .post(SUBMIT)
        .set(h.auth)
        .set('Content-Type', `application/fhir+json; charset=${charset}`)
        .send(JSON.stringify(eligibilityRequest()));
      expect(res.status, charset).toBe(415);
      expectOutcome(res.body, 415, { code: 'not-supported' });
    }
    const utf8 = await request(h.url)
      .post(SUBMIT)
      .set(h.auth)
      .set('Content-Type', 'application/fhir+json; charset=UTF-8')
      .send(JSON.stringify(eligibilityRequest()));
    expect(utf8.status).toBe(200);
  });
});

describe('content negotiation', () => {
  it('$submit with Content-Type application/json is served like application/fhir+json', async () => {
    const res = await request(h.url)
      .post(SUBMIT)
      .set(h.auth)
      .set('Content-Type', 'application/json')
      .send(JSON.stringify(eligibilityRequest({ emiratesId: '784-1990-0000001-0' })));
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(String(res.headers['content-type'])).toMatch(/^application\/fhir\+json/);
    expectValidFhir(res.body);
    expect((res.body as { resourceType: string }).resourceType).toBe('CoverageEligibilityResponse');
    expect(String(res.headers.location)).toContain('/fhir/CoverageEligibilityResponse/');
  });

  it('_format=json (and the JSON MIME types) -> 200 CapabilityStatement', async () => {
    for (const format of ['json', 'application/fhir+json', 'application/json']) {
      const res = await request(h.url).get('/fhir/metadata').query({ _format: format });
      expect(res.status, format).toBe(200);
      expect(String(res.headers['content-type']), format).toMatch(/^application\/fhir\+json/);
      expectValidFhir(res.body);
      expect((res.body as { resourceType: string }).resourceType).toBe('CapabilityStatement');
    }
    // As the spec writes it, the "+" left unencoded (it decodes to a space).
    const raw = await request(h.url).get('/fhir/metadata?_format=application/fhir+json');
    expect(raw.status).toBe(200);
    expectValidFhir(raw.body);
  });

  it('_format=xml -> 406 not-supported OperationOutcome, even when Accept asks for JSON', async () => {
    for (const format of ['xml', 'application/fhir+xml', 'text/html']) {
      const res = await request(h.url)
        .get('/fhir/metadata')
        .query({ _format: format })
        .set('Accept', FHIR_JSON);
      expect(res.status, format).toBe(406);
      expect(String(res.headers['content-type']), format).toMatch(/^application\/fhir\+json/);
      expectOutcome(res.body, 406, { code: 'not-supported' });
    }
  });

  it('_format overrides Accept: _format=json with Accept: application/xml -> 200', async () => {
    const res = await request(h.url).get('/fhir/metadata?_format=json').set('Accept', 'application/xml');
    expect(res.status).toBe(200);
    expectValidFhir(res.body);
  });

  it('Accept: application/xml (or fhir+xml) alone -> 406 OperationOutcome; JSON or */* -> 200', async () => {
    for (const accept of ['application/xml', 'application/fhir+xml', 'text/html']) {
      const res = await request(h.url).get('/fhir/metadata').set('Accept', accept);
      expect(res.status, accept).toBe(406);
      expectOutcome(res.body, 406, { code: 'not-supported' });
    }
    // Authenticated routes negotiate too (before the key is even looked at).
    const read = await request(h.url)
      .get('/fhir/CoverageEligibilityResponse/any-id')
      .set(h.auth)
      .set('Accept', 'application/fhir+xml');
    expect(read.status).toBe(406);
    expectOutcome(read.body, 406, { code: 'not-supported' });
    for (const accept of [
      FHIR_JSON,
      'application/json',
      '*/*',
      'application/fhir+xml;q=0.9, application/fhir+json',
    ]) {
      const res = await request(h.url).get('/fhir/metadata').set('Accept', accept);
      expect(res.status, accept).toBe(200);
      expectValidFhir(res.body);
    }
  });
});
