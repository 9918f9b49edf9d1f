/**
 * The upstream's document store: the signed links of screenshots and letters (docs/upstream.md,
 * "Signed links"). Which links may be fetched at all, and a download held to a size limit while it
 * streams (the evidence capture, docs/evidence.md), so a huge or endless body is never buffered.
 */
import { request as httpRequest } from 'undici';

/**
 * Where document links may point besides any https URL: the upstream's own origins (the sandbox
 * serves its files over http). Anything else is refused, so a wrong or hostile upstream answer
 * cannot make the adapter fetch an internal address.
 */
export function allowedDocumentUrl(url: string, origins: readonly string[]): boolean {
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'https:' || origins.includes(parsed.origin);
  } catch {
    return false;
  }
}

export type Download =
  | { ok: true; bytes: Buffer; contentType: string | null }
  /**
   * expired: the store refused the link (403, 404, 410: expired or gone), a fresh link may help;
   * too-big: over the limit, no link will help; unavailable: the store failed or the link is not
   * one the adapter fetches.
   */
  | { ok: false; reason: 'expired' | 'too-big' | 'unavailable' };

const REFUSED = new Set([401, 403, 404, 410]);

/** Downloads a document, stopping as soon as it passes `maxBytes` (its Content-Length first). */
export async function downloadDocument(
  url: string,
  maxBytes: number,
  origins: readonly string[],
): Promise<Download> {
  if (!allowedDocumentUrl(url, origins)) return { ok: false, reason: 'unavailable' };
  let response: Awaited<ReturnType<typeof httpRequest>>;
  try {
    response = await httpRequest(url, { method: 'GET', headersTimeout: 15_000, bodyTimeout: 30_000 });
  } catch {
    return { ok: false, reason: 'unavailable' };
  }
  const { statusCode, headers, body } = response;
  // A body given up on (too big) is destroyed: its abort is expected, never an uncaught error.
  body.on('error', () => undefined);
  if (statusCode !== 200) {
    await body.dump().catch(() => undefined);
    return { ok: false, reason: REFUSED.has(statusCode) ? 'expired' : 'unavailable' };
  }
  const declared = Number(headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    body.destroy();
    return { ok: false, reason: 'too-big' };
  }
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      const buffer = chunk as Buffer;
      size += buffer.length;
      if (size > maxBytes) {
        body.destroy();
        return { ok: false, reason: 'too-big' };
      }
      chunks.push(buffer);
    }
  } catch {
    return { ok: false, reason: 'unavailable' };
  }
  const type = headers['content-type'];
  return {
    ok: true,
    bytes: Buffer.concat(chunks, size),
    contentType: typeof type === 'string' ? type : null,
  };
}
