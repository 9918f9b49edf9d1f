import { PassThrough, Writable } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { createLogger, redact, registerSecret, scrubString } from '../../src/log.js';

function capture(level = 'debug') {
  const stream = new PassThrough();
  const lines: string[] = [];
  stream.on('data', (chunk: Buffer) => lines.push(...chunk.toString('utf8').split('\n').filter(Boolean)));
  return { logger: createLogger(level, stream), lines };
}

describe('log redaction', () => {
  it.each([
    ['an Emirates ID with dashes', 'member 784-1990-1234567-6 not found'],
    ['an Emirates ID without dashes', 'id=784199012345676'],
    ['a phone number', 'call +971 50 123 4567'],
    ['a card number', 'card 1234567890123456'],
    ['a date of birth', 'dob 1990-01-31'],
    ['a slashed date', 'born 31/01/1990'],
    ['an Emirates ID with dots', 'id 784.1990.1234567.1'],
    ['a card number followed by a colon', 'member 1234567890123456: not found'],
    ['a phone number with parentheses', 'tel (050) 1234567'],
    ['a dotted phone number', 'tel 050.123.4567'],
    ['a phone number followed by a colon', 'tel 0501234567:visit'],
    ['a dotted date', 'born 12.05.1990'],
    ['a short slashed date', 'born 5/3/1990'],
    ['a year-first slashed date', 'born 1990/05/12'],
  ])('scrubs %s from free text', (_what, text) => {
    const scrubbed = scrubString(text);
    expect(scrubbed).toContain('[redacted]');
    expect(scrubbed).not.toMatch(/\d{4,}/);
  });

  it('keeps request, check and task ids (UUIDs) whole', () => {
    const id = '046bbaa3-80a1-4234-9876-e0ff793312eb';
    expect(scrubString(id)).toBe(id);
    expect(scrubString(`${id} 784-1990-1234567-6`)).toContain('[redacted]');
  });

  it('keeps ISO timestamps, addresses, versions and short numbers readable', () => {
    for (const text of [
      'at 2026-11-22T10:00:00Z status 502 after 3 tries',
      'listening on http://127.0.0.1:8080 (v1.2.3), 1234 ms',
      'updated 2026-11-22T10:00:00.000Z',
      'listening on http://10.0.0.12:8080 and http://192.168.100.200:8080',
      'connect ECONNREFUSED 10.1.2.34:5432 (version 10.20.300)',
    ])
      expect(scrubString(text)).toBe(text);
  });

  it('replaces values under patient-data and secret keys at any depth', () => {
    const out = redact({
      request_dump: { emirates_id: '784-1990-1234567-6' },
      nested: { patient: { name: 'Aisha Khan', phone: '0501234567', dob: '1990-01-01' } },
      headers: { 'x-api-key': 'k', authorization: 'Bearer t' },
      card_number: 'C-77',
      status: 'found',
    });
    expect(out).toEqual({
      request_dump: '[redacted]',
      nested: { patient: { name: '[redacted]', phone: '[redacted]', dob: '[redacted]' } },
      headers: { 'x-api-key': '[redacted]', authorization: '[redacted]' },
      card_number: '[redacted]',
      status: 'found',
    });
  });

  it('never writes a registered secret or patient data to a log line at debug level', () => {
    registerSecret('upstream-key-Zq81');
    const { logger, lines } = capture();
    logger.debug('upstream said upstream-key-Zq81 was wrong for Aisha', {
      name: 'Aisha Khan',
      body: '{"emirates_id":"784-1990-1234567-6"}',
      error: new Error('card 1234567890123456 refused'),
    });
    const text = lines.join('\n');
    expect(lines).toHaveLength(1);
    for (const secret of ['upstream-key-Zq81', 'Aisha Khan', '784-1990-1234567-6', '1234567890123456']) {
      expect(text).not.toContain(secret);
    }
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 'debug' });
  });

  it('scrubs a registered secret from text that has no digit', () => {
    registerSecret('upstream-key-without-digits');
    expect(scrubString('sent upstream-key-without-digits to the portal')).toBe(
      'sent [redacted] to the portal',
    );
  });

  it('judges a key the same on every line, also past the keys it remembers', () => {
    for (let i = 0; i < 1500; i += 1) redact({ [`field${i}`]: 'x' });
    for (let round = 0; round < 2; round += 1) {
      expect(redact({ Emirates_ID: 'x', 'Card-Number': 'y', keyNumber1400: 'z' })).toEqual({
        Emirates_ID: '[redacted]',
        'Card-Number': '[redacted]',
        keyNumber1400: 'z',
      });
      expect(redact({ password: 'p', field1499: 'q' })).toEqual({ password: '[redacted]', field1499: 'q' });
    }
  });
});

describe('log lines', () => {
  function sink() {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        lines.push(chunk.toString('utf8'));
        callback();
      },
    });
    return { stream, lines };
  }

  it('writes each line whole to its stream before the call returns, one write per line', () => {
    const { stream, lines } = sink();
    const logger = createLogger('info', stream);
    logger.info('request', { method: 'GET', route: '/fhir/CoverageEligibilityResponse/:id', status: 200 });
    logger.info('request', { method: 'GET', route: '/health', status: 200 });
    expect(lines).toHaveLength(2);
    expect(lines.every((line) => line.endsWith('\n') && line.indexOf('\n') === line.length - 1)).toBe(true);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 'info', message: 'request', status: 200 });
  });

  it('schedules nothing per line (no timer or immediate is left behind by a line)', () => {
    const { stream, lines } = sink();
    const logger = createLogger('info', stream);
    logger.info('warm-up');
    const immediate = vi.spyOn(globalThis, 'setImmediate');
    const timeout = vi.spyOn(globalThis, 'setTimeout');
    try {
      for (let i = 0; i < 10; i += 1) logger.info('request', { status: 200 });
      expect(lines).toHaveLength(11);
      expect(immediate).not.toHaveBeenCalled();
      expect(timeout).not.toHaveBeenCalled();
    } finally {
      immediate.mockRestore();
      timeout.mockRestore();
    }
  });

  it('writes to stdout when no stream is given', () => {
    const write = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      createLogger('info').info('listening', { url: 'http://127.0.0.1:8080' });
      expect(write).toHaveBeenCalledTimes(1);
      expect(JSON.parse(String(write.mock.calls[0]?.[0]))).toMatchObject({ message: 'listening' });
    } finally {
      write.mockRestore();
    }
  });
});
