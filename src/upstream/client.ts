/**
 * UpstreamClient: the undici client of the upstream eligibility service (docs/upstream.md).
 *
 * Never throws. Every call returns `{ ok: true, value }` or a typed failure:
 * - `http`: any non-2xx answer, with its status and body text (at most 2 KB);
 * - `network`: the exchange broke; `sentRequest: false` only when the request certainly never
 *   reached the server (refused, unresolvable, connect timeout), since the check lifecycle re-sends
 *   create-task only then (docs/lifecycle.md: create-task at most once per check);
 * - `timeout`: no headers or no body within requestTimeoutMs;
 * - `invalid-body`: a 2xx whose body is not JSON or fails the zod schema.
 * The API key is sent as a header only: it never appears in a failure (bodies are scrubbed of it).
 */
import { Pool } from 'undici';
import type { Dispatcher } from 'undici';
import type { z } from 'zod';
import type { UpstreamCredentials, UpstreamFailure, UpstreamPort, UpstreamResult } from './port.js';
import type { CreateTaskAnswer, Envelope, UpstreamTaskRequest } from './contract.js';
import { createTaskAnswerSchema, envelopeSchema } from './contract.js';

export interface UpstreamClientOptions {
  /** Base URL ending in /v2/api-integration-v3. */
  baseUrl: string;
  /** Connection establishment limit, ms (default 5000). */
  connectTimeoutMs?: number;
  /** Limit for the headers, and for each gap in the body, ms (default 15000). */
  requestTimeoutMs?: number;
  /** Keep-alive connections to the upstream (default 10). */
  connections?: number;
  /** A dispatcher to use instead of the client's own pool (tests, proxies). Not closed by close(). */
  dispatcher?: Dispatcher;
}

/** Largest error body kept in an `http` failure. */
export const MAX_ERROR_BODY_BYTES = 2048;

/** Error codes meaning the request certainly never reached the server. */
const NEVER_SENT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'UND_ERR_CONNECT_TIMEOUT',
  // Rejected by undici before dispatch (bad header value, client closed).
  'UND_ERR_INVALID_ARG',
  'UND_ERR_CLOSED',
]);

const TIMEOUT_PHASES: Readonly<Record<string, string>> = {
  UND_ERR_HEADERS_TIMEOUT: 'headers',
  UND_ERR_BODY_TIMEOUT: 'body',
};

/** The error code of a thrown error, looking into causes and aggregated errors (happy eyeballs). */
function errorCode(err: unknown, depth = 0): string | undefined {
  if (typeof err !== 'object' || err === null || depth > 3) return undefined;
  if ('code' in err && typeof err.code === 'string') return err.code;
  if (err instanceof AggregateError) return errorCode(err.errors[0], depth + 1);
  if ('cause' in err) return errorCode(err.cause, depth + 1);
  return undefined;
}

/** Maps a thrown undici or socket error to a typed failure. */
export function failureFromError(err: unknown): UpstreamFailure {
  const code = errorCode(err);
  const phase = code ? TIMEOUT_PHASES[code] : undefined;
  if (phase) return { kind: 'timeout', phase };
  if (code && NEVER_SENT_CODES.has(code)) return { kind: 'network', code, sentRequest: false };
  return { kind: 'network', code: code ?? 'UNKNOWN', sentRequest: true };
}

/** Truncates to at most `max` UTF-8 bytes without splitting a character. */
function truncateUtf8(text: string, max: number): string {
  const bytes = Buffer.from(text, 'utf8');
  if (bytes.length <= max) return text;
  return bytes
    .subarray(0, max)
    .toString('utf8')
    .replace(/\uFFFD$/, '');
}

function scrub(text: string, secret: string | undefined): string {
  return secret && secret.length > 0 ? text.split(secret).join('[redacted]') : text;
}

type Method = 'GET' | 'POST';

export class UpstreamClient implements UpstreamPort {
  private readonly origin: string;
  private readonly basePath: string;
  private readonly dispatcher: Dispatcher;
  private readonly ownsDispatcher: boolean;
  private readonly timeoutMs: number;

  constructor(options: UpstreamClientOptions) {
    const url = new URL(options.baseUrl);
    this.origin = url.origin;
    this.basePath = url.pathname.replace(/\/+$/, '');
    this.timeoutMs = options.requestTimeoutMs ?? 15_000;
    this.ownsDispatcher = options.dispatcher === undefined;
    this.dispatcher =
      options.dispatcher ??
      new Pool(this.origin, {
        connections: options.connections ?? 10,
        connect: { timeout: options.connectTimeoutMs ?? 5_000 },
        keepAliveTimeout: 10_000,
        keepAliveMaxTimeout: 60_000,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
  }

  /** POST /create-task: queues one real check. */
  createTask(
    creds: UpstreamCredentials,
    body: UpstreamTaskRequest,
  ): Promise<UpstreamResult<CreateTaskAnswer>> {
    return this.call('POST', '/create-task', createTaskAnswerSchema, creds, body);
  }

  /** GET /eligibility-result/{task_id}: progress and result in one envelope. */
  getResult(creds: UpstreamCredentials, taskId: string): Promise<UpstreamResult<Envelope>> {
    return this.call('GET', `/eligibility-result/${encodeURIComponent(taskId)}`, envelopeSchema, creds);
  }

  /** GET /health: no auth headers; any JSON body counts. */
  health(): Promise<UpstreamResult<unknown>> {
    return this.call('GET', '/health', null, null);
  }

  /** Closes the client's own pool (an injected dispatcher is left to its owner). */
  async close(): Promise<void> {
    if (this.ownsDispatcher) await this.dispatcher.close();
  }

  private headers(creds: UpstreamCredentials | null, hasBody: boolean): Record<string, string> {
    return {
      accept: 'application/json',
      ...(hasBody ? { 'content-type': 'application/json' } : {}),
      ...(creds
        ? { 'x-api-key': creds.apiKey, 'X-Clinic-ID': creds.clinicId, 'X-Client-ID': creds.clientId }
        : {}),
    };
  }

  private async call<T>(
    method: Method,
    path: string,
    schema: z.ZodType<T> | null,
    creds: UpstreamCredentials | null,
    body?: unknown,
  ): Promise<UpstreamResult<T>> {
    let status: number;
    let text: string;
    try {
      const response = await this.dispatcher.request({
        origin: this.origin,
        path: `${this.basePath}${path}`,
        method,
        headers: this.headers(creds, body !== undefined),
        body: body === undefined ? undefined : JSON.stringify(body),
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      });
      status = response.statusCode;
      text = await response.body.text();
    } catch (err) {
      return { ok: false, error: failureFromError(err) };
    }
    if (status < 200 || status > 299) {
      const kept = truncateUtf8(scrub(text, creds?.apiKey), MAX_ERROR_BODY_BYTES);
      return { ok: false, error: { kind: 'http', status, body: kept } };
    }
    // A 2xx body may echo the key too (an error message quoting it): it never reaches a CER or a log.
    return parseBody(scrub(text, creds?.apiKey), schema);
  }
}

function parseBody<T>(text: string, schema: z.ZodType<T> | null): UpstreamResult<T> {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return { ok: false, error: { kind: 'invalid-body', issues: [{ message: 'response body is not JSON' }] } };
  }
  if (!schema) return { ok: true, value: json as T };
  const parsed = schema.safeParse(json);
  if (parsed.success) return { ok: true, value: parsed.data };
  // Paths and messages only: never the offending values (they may hold patient data).
  const issues = parsed.error.issues.map((i) => ({
    path: i.path.map(String).join('.'),
    code: i.code,
    message: i.message,
  }));
  return { ok: false, error: { kind: 'invalid-body', issues } };
}
