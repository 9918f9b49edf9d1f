/**
 * A real HTTP endpoint on a local port that records every notification POSTed to it (the
 * integration engine's side of a subscription), and answers what the test tells it to.
 */
import { createServer } from 'node:http';
import type { IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Bundle, Parameters } from 'fhir/r4.js';

export interface Received {
  at: number;
  path: string;
  headers: IncomingHttpHeaders;
  body: Bundle;
  /** The status the receiver answered. */
  status?: number;
}

export interface Receiver {
  /** `http://127.0.0.1:<port>` */
  url: string;
  received: Received[];
  /** The status to answer a notification with (default 200); it is recorded either way. */
  answer: (received: Received) => number;
  /** How long each answer is held back (to see overlapping deliveries). */
  delayMs: number;
  /** When set, how long this notification's answer is held back (instead of delayMs). */
  delayOf?: (received: Received) => number;
  /** The most notifications that were being received at once. */
  maxConcurrent: number;
  close(): Promise<void>;
}

export async function startReceiver(port = 0): Promise<Receiver> {
  const receiver: Receiver = {
    url: '',
    received: [],
    answer: () => 200,
    delayMs: 0,
    maxConcurrent: 0,
    close: () => Promise.resolve(),
  };
  let concurrent = 0;
  const server = createServer((req, res) => {
    concurrent += 1;
    receiver.maxConcurrent = Math.max(receiver.maxConcurrent, concurrent);
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const received: Received = {
        at: Date.now(),
        path: req.url ?? '',
        headers: req.headers,
        body: JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Bundle,
      };
      receiver.received.push(received);
      received.status = receiver.answer(received);
      res.statusCode = received.status;
      setTimeout(
        () => {
          concurrent -= 1;
          res.end('ok');
        },
        receiver.delayOf?.(received) ?? receiver.delayMs,
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  receiver.close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return receiver;
}

/** The status Parameters of a notification Bundle (its first entry). */
export function statusOf(bundle: Bundle): Parameters {
  return bundle.entry?.[0]?.resource as Parameters;
}

/** A named parameter's value of the status Parameters. */
export function param(parameters: Parameters, name: string): string | undefined {
  const p = parameters.parameter?.find((x) => x.name === name);
  return p?.valueCode ?? p?.valueString ?? p?.valueCanonical ?? p?.valueReference?.reference;
}

/** The notification-event parts: event number and focus of each. */
export function eventsOf(bundle: Bundle): Array<{ number: number; focus?: string }> {
  return (statusOf(bundle).parameter ?? [])
    .filter((p) => p.name === 'notification-event')
    .map((p) => ({
      number: Number(p.part?.find((x) => x.name === 'event-number')?.valueString),
      focus: p.part?.find((x) => x.name === 'focus')?.valueReference?.reference,
    }));
}

/** The type of a notification (handshake, heartbeat, event-notification). */
export function typeOf(received: Received): string | undefined {
  return param(statusOf(received.body), 'type');
}
