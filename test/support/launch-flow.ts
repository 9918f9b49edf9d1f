/**
 * Follows a SMART launch over real HTTP as a browser would (redirects one by one, cookies per
 * host), from `GET /app/launch` through the EHR's authorization server back to the adapter's
 * callback; every answer is kept, so a test can look for a token in any of them.
 */

export interface Hop {
  url: string;
  status: number;
  location: string | null;
  body: string;
  setCookies: string[];
}

export interface LaunchFlow {
  hops: Hop[];
  /** The adapter's `eligibility_session` cookie (`name=value`), when the callback set one. */
  sessionCookie: string | undefined;
  /** The last answer (the callback's, or the first one that did not redirect). */
  last: Hop;
}

/** Follows `start` for at most 10 redirects; stops after the adapter's callback answers. */
export async function followLaunch(start: string, callbackPrefix: string): Promise<LaunchFlow> {
  const jar = new Map<string, Map<string, string>>();
  const hops: Hop[] = [];
  let url = start;
  let sessionCookie: string | undefined;
  for (let i = 0; i < 10; i++) {
    const host = new URL(url).host;
    const cookies = jar.get(host) ?? new Map<string, string>();
    jar.set(host, cookies);
    const response = await fetch(url, {
      redirect: 'manual',
      headers: cookies.size ? { cookie: [...cookies].map(([k, v]) => `${k}=${v}`).join('; ') } : {},
    });
    const setCookies = response.headers.getSetCookie();
    for (const cookie of setCookies) {
      const [pair] = cookie.split(';');
      const at = pair?.indexOf('=') ?? -1;
      if (pair && at > 0) cookies.set(pair.slice(0, at), pair.slice(at + 1));
      if (pair?.startsWith('eligibility_session=')) sessionCookie = pair;
    }
    const hop: Hop = {
      url,
      status: response.status,
      location: response.headers.get('location'),
      body: await response.text(),
      setCookies,
    };
    hops.push(hop);
    if (!hop.location || url.startsWith(callbackPrefix)) return { hops, sessionCookie, last: hop };
    url = new URL(hop.location, url).href;
  }
  throw new Error('too many redirects');
}
