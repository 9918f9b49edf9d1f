/**
 * A FHIR client of one EHR as a SMART Backend Services client: searches and reads under
 * `fhirBaseUrl` only (its token endpoint is the one other address ever called), each exchange
 * bounded (http.ts), every page of a search followed through its `next` link while that link
 * stays under `fhirBaseUrl` (a link anywhere else ends the search as a failure: never followed).
 * https://hl7.org/fhir/R4/http.html#paging
 *
 * Why not fhir-kit-client here: it follows whatever `next` URL a server sends and reads bodies of
 * any size with no deadline; each of those is a rule this client exists to keep, and checking them
 * around it would mean doing every request twice over. Its URL building is a line here.
 */
import type { Bundle, Resource } from 'fhir/r4.js';
import type { EhrSchedule } from '../config.js';
import { endpointAllowed } from './addresses.js';
import { BackendToken } from './backend-token.js';
import { EhrError, type EhrHttp } from './http.js';

/** Pages of one search at most: 100 per page, 10,000 resources. */
const MAX_PAGES = 100;

export interface EhrClientOptions {
  now: () => number;
  /** Counts each request to the EHR (token requests included). */
  onRequest?: () => void;
}

export class EhrClient {
  readonly token: BackendToken;
  private readonly base: string;

  constructor(
    settings: Pick<EhrSchedule, 'fhirBaseUrl' | 'clientId' | 'clientKeys' | 'scope'>,
    private readonly http: EhrHttp,
    private readonly options: EhrClientOptions,
  ) {
    this.base = settings.fhirBaseUrl;
    this.token = new BackendToken(settings, http, {
      now: options.now,
      onTokenRequest: () => options.onRequest?.(),
    });
  }

  /**
   * Every resource of a search (`Appointment`, its parameters), page after page, with the
   * `search.mode` each came with (`include` for an `_include`d one).
   */
  async search(
    resourceType: string,
    params: readonly [string, string][],
  ): Promise<{ resource: Resource; mode: 'match' | 'include' }[]> {
    const query = new URLSearchParams(params as [string, string][]).toString();
    let url: string | undefined = `${this.base}/${resourceType}${query ? `?${query}` : ''}`;
    const found: { resource: Resource; mode: 'match' | 'include' }[] = [];
    for (let page = 0; url !== undefined; page += 1) {
      if (page >= MAX_PAGES) throw new EhrError('too-large', 'The search has too many pages');
      const bundle = (await this.get(url)) as unknown as Bundle;
      if (bundle.resourceType !== 'Bundle' || bundle.type !== 'searchset')
        throw new EhrError('not-fhir', 'The FHIR server did not answer a searchset Bundle');
      for (const entry of bundle.entry ?? []) {
        const resource = entry?.resource;
        if (!resource || typeof resource.resourceType !== 'string') continue;
        found.push({ resource, mode: entry.search?.mode === 'include' ? 'include' : 'match' });
      }
      const next = bundle.link?.find((l) => l.relation === 'next')?.url;
      url = next === undefined ? undefined : this.under(next);
    }
    return found;
  }

  /** A resource by its type and id. */
  async read(resourceType: string, id: string): Promise<Resource> {
    const body = await this.get(`${this.base}/${resourceType}/${encodeURIComponent(id)}`);
    if (body.resourceType !== resourceType)
      throw new EhrError('not-fhir', `The FHIR server did not answer a ${resourceType}`);
    return body as unknown as Resource;
  }

  /** A next link, made absolute, when it stays under fhirBaseUrl; else the search fails. */
  private under(link: string): string {
    let absolute: string;
    try {
      absolute = new URL(link, `${this.base}/`).href;
    } catch {
      throw new EhrError('not-fhir', 'The FHIR server sent a next link that is no URL');
    }
    if (!endpointAllowed(absolute, [this.base]))
      throw new EhrError('not-allowed', 'The FHIR server sent a next link outside its base: not followed');
    return absolute;
  }

  /** A GET under fhirBaseUrl with the token; a 401 asks for a new token once. */
  private async get(url: string): Promise<Record<string, unknown>> {
    for (let attempt = 0; ; attempt += 1) {
      const accessToken = await this.token.get();
      this.options.onRequest?.();
      try {
        return await this.http.json(url, { allowed: [this.base], accessToken });
      } catch (error) {
        if (attempt === 0 && error instanceof EhrError && error.status === 401) {
          this.token.forget();
          continue;
        }
        throw error;
      }
    }
  }
}
