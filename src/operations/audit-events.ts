/**
 * Read and search of a tenant's AuditEvents (https://hl7.org/fhir/R4/auditevent.html#search):
 * `entity` (reference: `CoverageEligibilityResponse/{id}`, its absolute URL, or the bare check
 * id), `date` (the `recorded` time, prefixes as in search.html#date), `agent` (the client id or
 * API key id, as a token: `value` or `system|value`), `action` (C R U D E), `_id`, `_count`
 * (default 20, at most 100) and `_cursor` (set by the `next` link: the events older than the page
 * before). Comma = OR; `date` may repeat (AND); another parameter repeated is 400. Newest first.
 * Another tenant's event is 404.
 */
import type { AuditEvent, Bundle, BundleEntry } from 'fhir/r4.js';
import type { AuditFilters } from '../checks/store/audit-store.js';
import type { CheckStore } from '../checks/store/check-store.js';
import { AUDIT_AGENT_SYSTEM, buildAuditEvent } from '../fhir/audit-event.js';
import type { AuditRow } from '../checks/store/check-store.js';
import { badRequest, notFound } from '../fhir/outcomes.js';
import { dateRange } from './search/params.js';
import type { FhirAnswer, FhirRequest } from './types.js';

export type AuditStore = Pick<CheckStore, 'searchAuditEvents'>;

/** The name this server gives itself as the audit source and destination agent. */
export const SERVER_NAME = 'fhir-eligibility-adapter';

function toAuditEvent(row: AuditRow): AuditEvent {
  return buildAuditEvent(row.record, row.id, row.recordedAt, SERVER_NAME);
}

const DEFAULT_COUNT = 20;
const MAX_COUNT = 100;
const ACTIONS = new Set(['C', 'R', 'U', 'D', 'E']);
const KNOWN = new Set(['entity', 'date', 'agent', 'action', '_id', '_count', '_cursor', '_format']);
/** A page's cursor: the id of the last event of the page before (32 hex digits, audit-store.ts). */
const CURSOR = /^[0-9a-f]{32}$/;
const ID = /^[A-Za-z0-9\-.]{1,64}$/;

/** The most comma-separated values of one parameter (each one more OR in the query). */
const MAX_VALUES = 100;
/** The most times `date` may repeat (each one more AND in the query). */
const MAX_DATES = 4;

function values(req: FhirRequest, name: string): string[] | undefined {
  const raw = req.query[name];
  if (raw === undefined) return undefined;
  if (Array.isArray(raw)) throw badRequest(`${name}: give it once (comma-separated values are OR)`, name);
  const list = raw.split(',').map((v) => v.trim());
  if (list.some((v) => v === '')) throw badRequest(`${name}: empty value`, name);
  if (list.length > MAX_VALUES) throw badRequest(`${name}: at most ${MAX_VALUES} values`, name);
  return list;
}

/** `CoverageEligibilityResponse/{id}`, a URL ending in it, or a bare id -> the stored relative reference. */
function entityReference(value: string): string {
  const match = /(?:^|\/)([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})$/.exec(value);
  if (match) return `${match[1]}/${match[2]}`;
  if (ID.test(value)) return `CoverageEligibilityResponse/${value}`;
  throw badRequest('entity: a reference such as CoverageEligibilityResponse/{id}', 'entity');
}

function agentValue(value: string): string {
  const bar = value.indexOf('|');
  if (bar < 0) return value;
  const system = value.slice(0, bar);
  if (system !== '' && system !== AUDIT_AGENT_SYSTEM) {
    throw badRequest(`agent: the system is ${AUDIT_AGENT_SYSTEM}`, 'agent');
  }
  return value.slice(bar + 1);
}

function parse(req: FhirRequest): { filters: AuditFilters; count: number } {
  for (const name of Object.keys(req.query)) {
    // A modifier on a known parameter is refused, never ignored: ignoring `entity:missing` would
    // answer wider than asked (https://hl7.org/fhir/R4/search.html#errors).
    const base = name.split(':')[0] ?? name;
    if (name !== base && KNOWN.has(base)) throw badRequest(`${name}: modifiers are not supported`, name);
    if (!KNOWN.has(name) && req.prefer?.includes('handling=strict')) {
      throw badRequest(`Unknown search parameter ${name}`, name);
    }
  }
  const filters: AuditFilters = {};
  const entity = values(req, 'entity');
  if (entity) filters.entity = entity.map(entityReference);
  const agent = values(req, 'agent');
  if (agent) filters.agent = agent.map(agentValue);
  const action = values(req, 'action');
  if (action) {
    if (!action.every((a) => ACTIONS.has(a))) throw badRequest('action: one of C R U D E', 'action');
    filters.action = action;
  }
  const ids = values(req, '_id');
  if (ids) {
    if (!ids.every((id) => ID.test(id))) throw badRequest('_id: not a FHIR id', '_id');
    filters.ids = ids;
  }
  const date = req.query.date;
  if (Array.isArray(date) && date.length > MAX_DATES) {
    throw badRequest(`date: at most ${MAX_DATES} times (a range needs two)`, 'date');
  }
  if (date !== undefined) {
    filters.date = (Array.isArray(date) ? date : [date]).map((d) => dateRange('date', d));
  }
  const cursor = values(req, '_cursor');
  if (cursor) {
    if (cursor.length !== 1 || !CURSOR.test(cursor[0] ?? '')) {
      throw badRequest('_cursor: give the value of a next link as it is', '_cursor');
    }
    filters.before = cursor[0];
  }
  let count = DEFAULT_COUNT;
  const countRaw = values(req, '_count');
  if (countRaw) {
    if (countRaw.length !== 1 || !/^\d{1,6}$/.test(countRaw[0] ?? '')) {
      throw badRequest('_count: a whole number', '_count');
    }
    count = Math.min(MAX_COUNT, Number(countRaw[0]));
  }
  return { filters, count };
}

/** GET /fhir/AuditEvent?... : a searchset Bundle of the tenant's events, newest first. */
export async function searchAuditEvents(
  req: FhirRequest,
  store: AuditStore,
  baseUrl: string,
): Promise<FhirAnswer> {
  const { filters, count } = parse(req);
  // One more than the page: whether there is a next page, without a count of all matches.
  const found = count === 0 ? [] : await store.searchAuditEvents(req.tenant.id, filters, count + 1);
  const rows = found.slice(0, count);
  const last = rows.at(-1);
  const entry: BundleEntry[] = rows.map((row) => ({
    fullUrl: `${baseUrl}/fhir/AuditEvent/${row.id}`,
    resource: toAuditEvent(row),
    search: { mode: 'match' },
  }));
  const bundle: Bundle = {
    resourceType: 'Bundle',
    type: 'searchset',
    link: [{ relation: 'self', url: `${baseUrl}/fhir/AuditEvent${appliedQuery(req, count)}` }],
    entry,
  };
  // Paging by the last id seen, not by offset: events recorded meanwhile neither repeat nor push
  // others off a page (https://hl7.org/fhir/R4/http.html#paging: the links are the server's own).
  if (last && found.length > count) {
    bundle.link?.push({
      relation: 'next',
      url: `${baseUrl}/fhir/AuditEvent${appliedQuery(req, count, last.id)}`,
    });
  }
  return { status: 200, body: bundle };
}

/** The parameters this search applied, for its self link (unknown ones were ignored: left out). */
function appliedQuery(req: FhirRequest, count: number, cursor?: string): string {
  const applied = new URLSearchParams();
  for (const [name, value] of Object.entries(req.query)) {
    if (!KNOWN.has(name) || name === '_format' || value === undefined) continue;
    if (cursor !== undefined && name === '_cursor') continue;
    // The count applied (at most MAX_COUNT), not the one asked.
    if (name === '_count') {
      applied.append(name, String(count));
      continue;
    }
    for (const one of Array.isArray(value) ? value : [value]) applied.append(name, String(one));
  }
  if (cursor !== undefined) applied.append('_cursor', cursor);
  const text = applied.toString();
  return text ? `?${text}` : '';
}

/** GET /fhir/AuditEvent/{id}: the tenant's event, else 404. */
export async function readAuditEvent(req: FhirRequest, store: AuditStore): Promise<FhirAnswer> {
  const id = req.params.id ?? '';
  if (!ID.test(id)) throw notFound(`AuditEvent/${id.slice(0, 64)} is not known`);
  const [row] = await store.searchAuditEvents(req.tenant.id, { ids: [id] }, 1);
  if (!row) throw notFound(`AuditEvent/${id} is not known`);
  return { status: 200, body: toAuditEvent(row) };
}
