/**
 * The key pair of a client script (smart-client, cds-client): read from `--key`, or made with jose
 * and written to `file` (mode 600, never printed), refusing to overwrite one.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { exportJWK, generateKeyPair } from 'jose';
import type { JWK } from 'jose';

/** The private JWK in `keyFile`, or a new one (`alg`, `kid`) written to `file`; null when `file` exists. */
export async function clientPrivateKey(
  keyFile: string | undefined,
  alg: 'ES384' | 'RS384',
  kid: string,
  file: string,
): Promise<{ privateJwk: JWK; created: boolean } | null> {
  if (keyFile) return { privateJwk: JSON.parse(readFileSync(keyFile, 'utf8')) as JWK, created: false };
  if (existsSync(file)) return null;
  const { privateKey } = await generateKeyPair(alg, { extractable: true });
  const privateJwk: JWK = { ...(await exportJWK(privateKey)), alg, kid, use: 'sig' };
  writeFileSync(file, `${JSON.stringify(privateJwk, null, 2)}\n`, { mode: 0o600 });
  return { privateJwk, created: true };
}

/** The public half of a private JWK. */
export function publicJwkOf(privateJwk: JWK): JWK {
  const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...publicJwk } = privateJwk;
  return publicJwk;
}
