/**
 * Logging: winston, JSON lines. A redaction format runs on every entry before it is written,
 * so patient data (Emirates ID, card number, name, phone, date of birth) and secrets (upstream
 * API keys, tenant keys, Authorization headers) never reach a log line at any level.
 *
 * Three layers: (1) keys that carry patient data or secrets are replaced whatever their value;
 * (2) every string is scrubbed of shapes that look like identifiers, phone numbers and dates;
 * (3) secrets registered at start-up (upstream API keys) are scrubbed wherever they appear.
 * Code should still never pass patient data to the logger: this is the safety net.
 */
import type { Writable } from 'node:stream';
import winston from 'winston';

export type Logger = winston.Logger;

const REDACTED = '[redacted]';

/** Keys whose values are never logged (compared lower-case, without _ and -). */
const SENSITIVE_KEYS = new Set(
  [
    'emirates_id',
    'emiratesid',
    'patient_emirates_id',
    'policy_holder_emirates_id',
    'card_number',
    'cardnumber',
    'subscriberid',
    'member_id',
    'policy_primary_member_id',
    'policy_primary_dha_member_id',
    'name',
    'given',
    'family',
    'policy_holder_name',
    'patient_name',
    'doctorname',
    'phone',
    'telecom',
    'dob',
    'birthdate',
    'dateofbirth',
    'mobile',
    'email',
    'firstname',
    'lastname',
    'fullname',
    'policy_holder_dob',
    'identifier',
    'apikey',
    'x-api-key',
    'api_key',
    'authorization',
    'password',
    'secret',
    'token',
    'body',
    'request_dump',
  ].map((k) => k.replace(/[_-]/g, '')),
);

/**
 * Shapes scrubbed from every string: Emirates ID (dashes, dots or spaces), runs of seven or more
 * digits with single separators (cards, phones: "0501234567", "(050) 123 4567", "+971 50
 * 1234567", a card followed by ":" or a letter), dotted phone numbers, and dates of any common
 * order (1990-01-01, 1990/1/1, 01/01/1990, 1.1.1990). An ISO timestamp (a date followed by
 * "T" and the time) is kept: it is when something happened, not a birth date.
 */
const SENSITIVE_PATTERNS: RegExp[] = [
  /784[-.\s]?\d{4}[-.\s]?\d{7}[-.\s]?\d/g,
  /(?<![\dA-Za-z])\+?(?:\(\d{1,4}\)\s?)?\d(?:[\s-]?\d){6,}(?!\d|T\d)/g,
  // Dotted phones end in a group of four or more digits; an IPv4 address or a version does not.
  /(?<![\d.])\+?\d{2,4}(?:\.\d{2,4}){1,2}\.\d{4,8}(?![\d.])/g,
  /(?<![\d.])\d{4}[-/.]\d{1,2}[-/.]\d{1,2}(?![\d.]|T\d)/g,
  /(?<![\d.])\d{1,2}[-/]\d{1,2}[-/](?:\d{4}|\d{2})(?![\d/-])/g,
  // Day.month.year only with a four-digit year (10.0.0.12 is an address, not a date).
  /(?<![\d.])\d{1,2}\.\d{1,2}\.\d{4}(?![\d.])/g,
];

/**
 * An upstream label (a task status, a payer code) as it may be logged or printed: a plain word;
 * anything else, which could be free text carrying patient data, is "other".
 */
export function safeLabel(value: string | null | undefined): string {
  if (value === null || value === undefined) return '-';
  return /^[A-Za-z][A-Za-z0-9_]{0,39}$/.test(value) ? value : 'other';
}

/** Keys already judged (the same few field names come back on every line), at most KEY_MEMO_SIZE. */
const keyMemo = new Map<string, boolean>();
const KEY_MEMO_SIZE = 1000;

function isSensitiveKey(key: string): boolean {
  const known = keyMemo.get(key);
  if (known !== undefined) return known;
  const sensitive = SENSITIVE_KEYS.has(key.toLowerCase().replace(/[_-]/g, ''));
  if (keyMemo.size < KEY_MEMO_SIZE) keyMemo.set(key, sensitive);
  return sensitive;
}

const registeredSecrets = new Set<string>();
const ANY_DIGIT = /[0-9]/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Registers a secret (e.g. an upstream API key) to be scrubbed from every log line. */
export function registerSecret(secret: string): void {
  if (secret.length >= 4) registeredSecrets.add(secret);
}

/** Scrubs one string of registered secrets and sensitive shapes. */
export function scrubString(value: string): string {
  // A UUID (request, check and task ids) cannot hold an Emirates ID, card or phone number.
  if (UUID.test(value)) return value;
  let out = value;
  for (const secret of registeredSecrets) if (out.includes(secret)) out = out.split(secret).join(REDACTED);
  // Every shape in SENSITIVE_PATTERNS has a digit: text without one (a route, a method) has none.
  if (!ANY_DIGIT.test(out)) return out;
  for (const pattern of SENSITIVE_PATTERNS) out = out.replace(pattern, REDACTED);
  return out;
}

/** Returns a deep copy with sensitive keys replaced and every string scrubbed. */
export function redact(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return scrubString(value);
  if (value === null || typeof value !== 'object') return value;
  if (depth > 8) return '[truncated]';
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1));
  if (value instanceof Error) return { name: value.name, message: scrubString(value.message) };
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(value)) {
    out[key] = isSensitiveKey(key) ? REDACTED : redact(v, depth + 1);
  }
  return out;
}

// Winston keeps level/message under string keys and its own symbols; redact the rest in place.
const redactFormat = winston.format((info) => {
  for (const key of Object.keys(info)) {
    if (key === 'level') continue;
    info[key] = isSensitiveKey(key) ? REDACTED : redact(info[key]);
  }
  return info;
});

const MESSAGE = Symbol.for('message');

/**
 * Writes each formatted line to its stream within the call, as winston's Console and Stream
 * transports do (stdout is synchronous for files and pipes), without their setImmediate per line
 * to emit 'logged', which nothing here listens to: about a third of a request line's CPU
 * (bench/README.md, figure 2).
 */
class LineTransport extends winston.transports.Stream {
  constructor(private readonly out: Writable) {
    super({ stream: out });
  }

  override log(info: Record<symbol, unknown>, callback: () => void): void {
    this.out.write(`${String(info[MESSAGE])}\n`);
    callback();
  }
}

/** Creates the service logger: every line to stdout. Tests pass a stream to capture every line. */
export function createLogger(level: string, stream?: Writable): Logger {
  return winston.createLogger({
    level,
    format: winston.format.combine(redactFormat(), winston.format.timestamp(), winston.format.json()),
    transports: [new LineTransport(stream ?? process.stdout)],
  });
}
