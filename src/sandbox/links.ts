/**
 * Signed file links of the sandbox, standing in for the upstream's expiring S3 links
 * (docs/upstream.md: "Signed links").
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Makes a signed link to a file key. */
export type Signer = (key: string) => string;

/** Links point at `{origin}/sandbox-files/{key}?sig=..&expires=..` (expires in epoch ms). */
export class LinkSigner {
  constructor(private readonly secret: string) {}

  private signature(key: string, expires: number): string {
    return createHmac('sha256', this.secret).update(`${key}\n${expires}`).digest('hex').slice(0, 32);
  }

  /** A signer of links on `origin` that expire `ttlMs` after `issuedAtMs`. */
  signer(origin: string, issuedAtMs: number, ttlMs: number): Signer {
    const expires = Math.round(issuedAtMs + ttlMs);
    return (key) =>
      `${origin}/sandbox-files/${encodeURIComponent(key)}?sig=${this.signature(key, expires)}&expires=${expires}`;
  }

  /** 'ok', or why the link is refused. */
  verify(key: string, sig: unknown, expires: unknown, nowMs: number): 'ok' | 'forged' | 'expired' {
    if (typeof sig !== 'string' || typeof expires !== 'string' || !/^\d+$/.test(expires)) return 'forged';
    const expected = Buffer.from(this.signature(key, Number(expires)));
    const given = Buffer.from(sig);
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) return 'forged';
    return Number(expires) < nowMs ? 'expired' : 'ok';
  }
}

/** A one-page PDF naming its key in a comment, so each document's bytes (and hash) are its own. */
function pdf(key: string): Buffer {
  return Buffer.from(
    `%PDF-1.4\n%${key.replace(/[^A-Za-z0-9_.-]/g, '_')}\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n` +
      '2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n' +
      '3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 100]>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n',
    'latin1',
  );
}

/** A 1x1 PNG, served for every other key (screenshots). */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==',
  'base64',
);

/**
 * The body and content type served for a file key. `screenshotBytes` pads a screenshot to that
 * size (pseudo-random bytes after the PNG's end, which readers ignore: distinct per key and, like
 * a real portal screenshot of a few hundred KB, not compressible; bench/evidence.ts).
 */
export function fileBody(key: string, screenshotBytes = 0): { contentType: string; body: Buffer } {
  if (key.endsWith('.pdf')) return { contentType: 'application/pdf', body: pdf(key) };
  if (screenshotBytes <= PNG.length) return { contentType: 'image/png', body: PNG };
  const body = Buffer.alloc(screenshotBytes);
  PNG.copy(body);
  // Bytes that do not compress (as a real PNG's do not), the same for the same key on every read.
  let state = createHmac('sha256', 'screenshot').update(key).digest().readUInt32LE(0) || 1;
  for (let i = PNG.length; i < screenshotBytes; i += 1) {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    body[i] = state & 0xff;
  }
  return { contentType: 'image/png', body };
}
