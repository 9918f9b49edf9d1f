/**
 * The HTTP exchange with an EHR, guarded: a request goes out only to a URL under one of the
 * allowed prefixes (addresses.ts: scheme, host, port and whole path segments), a redirect is
 * followed only to a URL that passes the same test, and every exchange is bounded in time and
 * size. The answer must be a JSON object. Anything else is an EhrError: its message never holds
 * a URL, a token or a body, so it may be logged as it is.
 */
import { Agent, request } from 'undici';
import { endpointAllowed } from './addresses.js';

export type EhrFailure = 'not-allowed' | 'unreachable' | 'timeout' | 'too-large' | 'status' | 'not-fhir';

/** Why an exchange with an EHR failed; no URL, token or body in it. */
export class EhrError extends Error {
  constructor(
    readonly reason: EhrFailure,
    message: string,
    readonly status?: number,
  ) {
    super(message);
    this.name = 'EhrError';
  }
}

export interface EhrLimits {
  /** Whole exchange, redirects included. */
  timeoutMs: number;
  /** Largest body read. */
  maxBytes: number;
  /** Redirects followed (each to an allowed URL). */
  maxRedirects: number;
}

export const DEFAULT_EHR_LIMITS: EhrLimits = {
  timeoutMs: 3000,
  maxBytes: 2 * 1024 * 1024,
  maxRedirects: 2,
};

export interface EhrExchange {
  method?: 'GET' | 'POST';
  /** Where the request may go (it and every redirect). */
  allowed: readonly string[];
  accessToken?: string | undefined;
  /** A form body (POST): the token request. */
  form?: URLSearchParams;
  /** Who is called, for the messages: "The FHIR server", "The token endpoint". */
  label?: string;
}

/** JSON from allowed addresses only. One per process (its connections are shared). */
export class EhrHttp {
  // undici's request never follows a redirect by itself: each one is checked here first.
  private readonly agent = new Agent({ connections: 32, keepAliveTimeout: 10_000 });

  constructor(readonly limits: EhrLimits = DEFAULT_EHR_LIMITS) {}

  /** Sends the request; resolves to the parsed JSON object. Refuses (before any request) a URL not allowed. */
  async json(url: string, exchange: EhrExchange): Promise<Record<string, unknown>> {
    const label = exchange.label ?? 'The FHIR server';
    const signal = AbortSignal.timeout(this.limits.timeoutMs);
    let target = url;
    for (let hop = 0; hop <= this.limits.maxRedirects; hop += 1) {
      if (!endpointAllowed(target, exchange.allowed))
        throw new EhrError('not-allowed', `${label} address is not one this service may call`);
      const answer = await this.send(target, exchange, label, signal);
      if (answer.location === undefined) return answer.body;
      // A redirect of a POST is not followed: the form would go to another address.
      if (exchange.method === 'POST') throw new EhrError('status', `${label} redirected a POST`);
      target = new URL(answer.location, target).href;
    }
    throw new EhrError('status', `${label} redirected too many times`);
  }

  private async send(
    url: string,
    exchange: EhrExchange,
    label: string,
    signal: AbortSignal,
  ): Promise<{ body: Record<string, unknown>; location?: undefined } | { location: string }> {
    let response: Awaited<ReturnType<typeof request>>;
    try {
      response = await request(url, {
        method: exchange.method ?? 'GET',
        dispatcher: this.agent,
        signal,
        headers: {
          accept: 'application/fhir+json, application/json',
          ...(exchange.accessToken ? { authorization: `Bearer ${exchange.accessToken}` } : {}),
          ...(exchange.form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
        },
        ...(exchange.form ? { body: exchange.form.toString() } : {}),
      });
    } catch (error) {
      throw failureOf(error, signal, label);
    }
    const { statusCode, headers, body } = response;
    if (statusCode >= 300 && statusCode < 400 && typeof headers.location === 'string') {
      await body.dump().catch(() => undefined);
      return { location: headers.location };
    }
    if (statusCode !== 200) {
      await body.dump().catch(() => undefined);
      throw new EhrError('status', `${label} answered HTTP ${statusCode}`, statusCode);
    }
    const declared = Number(headers['content-length'] ?? '0');
    if (declared > this.limits.maxBytes) {
      body.destroy();
      throw new EhrError('too-large', `${label} answer is too large`);
    }
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for await (const chunk of body) {
        size += (chunk as Buffer).length;
        if (size > this.limits.maxBytes) {
          body.destroy();
          throw new EhrError('too-large', `${label} answer is too large`);
        }
        chunks.push(chunk as Buffer);
      }
    } catch (error) {
      if (error instanceof EhrError) throw error;
      throw failureOf(error, signal, label);
    }
    try {
      const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
        throw new Error('not an object');
      return { body: parsed as Record<string, unknown> };
    } catch {
      throw new EhrError('not-fhir', `${label} did not answer JSON`);
    }
  }

  close(): Promise<void> {
    return this.agent.close();
  }
}

function failureOf(error: unknown, signal: AbortSignal, label: string): EhrError {
  if (signal.aborted) return new EhrError('timeout', `${label} did not answer in time`);
  const code = (error as { code?: unknown } | null)?.code;
  return new EhrError(
    'unreachable',
    `${label} could not be reached${typeof code === 'string' ? ` (${code})` : ''}`,
  );
}
