/**
 * What the check lifecycle needs from the upstream, as a narrow port. The undici client in
 * src/upstream/client.ts implements it; tests may wrap it to count calls.
 */
import type { CreateTaskAnswer, Envelope, UpstreamTaskRequest } from './contract.js';

export interface UpstreamCredentials {
  apiKey: string;
  clinicId: string;
  clientId: string;
}

export type UpstreamFailure =
  | { kind: 'http'; status: number; body?: string }
  | { kind: 'network'; code?: string; sentRequest: boolean }
  | { kind: 'timeout'; phase?: string }
  | { kind: 'invalid-body'; issues?: unknown };

export type UpstreamResult<T> = { ok: true; value: T } | { ok: false; error: UpstreamFailure };

export interface UpstreamPort {
  createTask(
    creds: UpstreamCredentials,
    body: UpstreamTaskRequest,
  ): Promise<UpstreamResult<CreateTaskAnswer>>;
  getResult(creds: UpstreamCredentials, taskId: string): Promise<UpstreamResult<Envelope>>;
  health(): Promise<UpstreamResult<unknown>>;
}

/** Short, patient-free description of a failure, for logs and metrics labels. */
export function describeFailure(error: UpstreamFailure): string {
  switch (error.kind) {
    case 'http':
      return `http-${error.status}`;
    case 'network':
      return `network-${error.code ?? 'error'}`;
    case 'timeout':
      return 'timeout';
    case 'invalid-body':
      return 'invalid-body';
  }
}
