/**
 * The search parameters of the checks' resources, parsed from the query string into the store's
 * filters and the page asked for (https://hl7.org/fhir/R4/search.html). The rules, by section:
 * - #combining: a repeated parameter is AND, comma-separated values are OR; `\,` `\|` `\$` `\\`
 *   are escapes (#escaping);
 * - #token: `system|value`, `|value` (no system), `system|` (any value of the system), `value`;
 * - #date and #prefix: every prefix, on the implicit range of the value's precision;
 * - #errors: a parameter the server does not know is ignored (and left out of the self link)
 *   unless `Prefer: handling=strict`; a known parameter with a wrong value or an unknown modifier
 *   is always an error (400 naming it in issue.expression);
 * - #count, #summary, #elements, #total, #sort, #include: the result parameters.
 * An empty value is ignored, as search.html#errors allows. Never a result wider than the query:
 * a parameter is either applied, or ignored (lenient, and absent from `self`), or refused.
 */
import type {
  CerOutcome,
  DateRange,
  SearchFilters,
  SearchSort,
  TokenValue,
} from '../../checks/store/check-store.js';
import { OperationOutcomeError, badRequest, outcome } from '../../fhir/outcomes.js';
import { parsePrefer } from '../../fhir/prefer.js';
import type { FhirRequest } from '../types.js';
import { elementsOf } from './subset.js';
import type { Subset, SubsetType } from './subset.js';

/** The default page size, and the most one page holds (`_count` above it is clamped: search.html#count). */
export const DEFAULT_COUNT = 20;
export const MAX_COUNT = 100;
/**
 * The most query pairs a search takes: more is refused before any work (too-costly,
 * search.html#errors), so no parameter is ever left unread and a search never widened.
 */
export const MAX_PAIRS = 100;
const MAX_OFFSET = 1_000_000;

const ID = /^[A-Za-z0-9\-.]{1,64}$/;
const OUTCOMES: readonly CerOutcome[] = ['queued', 'complete', 'error', 'partial'];

/** What a parameter filters on. */
type Target =
  | 'id'
  | 'patient'
  | 'request'
  | 'requestIdentifier'
  | 'insurer'
  | 'outcome'
  | 'created'
  | 'lastUpdated'
  | 'batch'
  | 'serviced'
  | 'nothing';

/** The search parameters of a resource type: name as written in the query (with modifier or chain) -> target. */
export type ParamTable = Readonly<Record<string, Target>>;

/** CoverageEligibilityResponse: one CER per check. */
export const RESPONSE_PARAMS: ParamTable = {
  _id: 'id',
  // The CER has no identifier of its own: identifier= matches none (the request's is request.identifier).
  identifier: 'nothing',
  patient: 'patient',
  'patient:identifier': 'patient',
  request: 'request',
  'request.identifier': 'requestIdentifier',
  insurer: 'insurer',
  outcome: 'outcome',
  created: 'created',
  _lastUpdated: 'lastUpdated',
  batch: 'batch',
};

/** CoverageEligibilityRequest: the stored request of each check. */
export const REQUEST_PARAMS: ParamTable = {
  _id: 'id',
  identifier: 'requestIdentifier',
  patient: 'patient',
  'patient:identifier': 'patient',
  created: 'created',
  batch: 'batch',
  serviced: 'serviced',
};

/** A `serviced` range; `local`: given without a time, so its bounds are days of the clinic's zone. */
export type ServicedRange = DateRange & { local: boolean };

/** Result parameters this service applies. */
const RESULT_PARAMS = new Set([
  '_count',
  '_offset',
  '_sort',
  '_total',
  '_summary',
  '_elements',
  '_include',
  '_revinclude',
]);
/** Parameters about the answer's format, handled by content negotiation: accepted, not echoed. */
const FORMAT_PARAMS = new Set(['_format', '_pretty']);

export interface ParsedSearch {
  filters: SearchFilters;
  /** True when a parameter can match nothing (CER identifier=): the store is not asked. */
  matchesNothing: boolean;
  /**
   * Batch ids (`batch=`, docs/batch-and-reuse.md), AND of ORs: the search turns each group into
   * the ids of the checks its batches list.
   */
  batches?: string[][];
  count: number;
  offset: number;
  sort: SearchSort[];
  /** `_total=none`: no total counted. */
  total: boolean;
  /** `_summary=count` or `_count=0`: the total only. */
  countOnly: boolean;
  /** `_include=CoverageEligibilityResponse:request`. */
  includeRequest: boolean;
  /** `_revinclude=CoverageEligibilityResponse:request` (CoverageEligibilityRequest, docs/previsit.md). */
  revIncludeResponses?: boolean;
  /**
   * `serviced=` (docs/previsit.md), ANDed: ranges of an appointment's start as dateRange reads them
   * (a date without a time in UTC); the search moves them to the clinic's time zone.
   */
  serviced?: ServicedRange[];
  /** `_summary=true|data` or `_elements`: the matches reduced (subset.ts). */
  subset?: Subset;
  /** The parameters applied, for the self link (unknown ones left out). */
  used: URLSearchParams;
}

/**
 * The URL of a page of a search: the parameters applied (`used`), the page size, and the offset
 * when not the first page (https://hl7.org/fhir/R4/http.html#paging).
 */
export function pageUrl(base: string, used: URLSearchParams, count: number, at: number): string {
  const params = new URLSearchParams(used);
  params.set('_count', String(count));
  if (at > 0) params.set('_offset', String(at));
  return `${base}?${params.toString()}`;
}

/** Splits on a separator not escaped by a backslash (search.html#escaping). */
function split(raw: string, separator: ',' | '|'): string[] {
  const parts: string[] = [];
  let current = '';
  for (let i = 0; i < raw.length; i += 1) {
    const char = raw[i]!;
    if (char === '\\' && i + 1 < raw.length) {
      current += char + raw[i + 1]!;
      i += 1;
    } else if (char === separator) {
      parts.push(current);
      current = '';
    } else current += char;
  }
  parts.push(current);
  return parts;
}

function unescape(raw: string): string {
  return raw.replace(/\\([\\,|$])/g, '$1');
}

/** The comma-separated values of a parameter, still escaped (each is unescaped by its parser). */
function values(name: string, raw: string): string[] {
  const parts = split(raw, ',');
  if (parts.some((part) => part === '')) throw badRequest(`${name}: an empty value in a list`, name);
  return parts;
}

function token(name: string, raw: string): TokenValue {
  const parts = split(raw, '|');
  if (parts.length === 1) return { value: unescape(parts[0]!) };
  if (parts.length > 2 || (parts[0] === '' && parts[1] === ''))
    throw badRequest(`${name}: a token is system|value, |value, system| or value`, name);
  const system = unescape(parts[0]!);
  const value = unescape(parts[1]!);
  return value === '' ? { system } : { system, value };
}

function id(name: string, raw: string): string {
  if (!ID.test(raw)) throw badRequest(`${name}: "${raw.slice(0, 70)}" is not a FHIR id`, name);
  return raw;
}

/**
 * A reference to a CoverageEligibilityRequest (search.html#reference): its id,
 * `CoverageEligibilityRequest/{id}`, or the absolute URL of one. An absolute URL is this
 * service's request only under its base URL + `/fhir/`; a request on another server is a valid
 * reference that no check here refers to (every check's CER refers to its own request), so it
 * matches nothing (undefined) rather than being refused or taken for a local id.
 */
function requestId(name: string, raw: string, baseUrl: string | undefined): string | undefined {
  const match = /^(?:(.*)\/)?CoverageEligibilityRequest\/([^/]+)$/.exec(raw);
  if (!match) {
    if (raw.includes('/'))
      throw badRequest(`${name}: a reference to a CoverageEligibilityRequest, or its id`, name);
    return id(name, raw);
  }
  const at = match[1];
  const local = id(name, match[2]!);
  if (at === undefined) return local;
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(at))
    throw badRequest(`${name}: a reference to a CoverageEligibilityRequest, or its id`, name);
  return baseUrl !== undefined && `${at}/` === `${baseUrl.replace(/\/+$/, '')}/fhir/` ? local : undefined;
}

const DATE =
  /^(eq|ne|gt|lt|ge|le|sa|eb|ap)?(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2}))?)?)?$/;

/**
 * A date parameter as a range of the instant column (search.html#date, #prefix). The value names
 * the range of its precision, [lo, hi): a year, month, day, minute, second or fraction of a second
 * (its digits' precision, in whole ms: see below); a date
 * without a time is taken in UTC. The stored time is an instant t, so `eq` is lo <= t < hi,
 * `ne` its negation, `gt`/`sa` t >= hi, `lt`/`eb` t < lo, `ge` t >= lo, `le` t < hi, and `ap`
 * widens [lo, hi) by 10% of the distance between the value and now on each side, as the page
 * recommends.
 */
export function dateRange(name: string, raw: string, now = Date.now()): DateRange {
  // Date.UTC reads the years 0-99 as 1900-1999: the year is set on its own.
  const utc = (y: number, month: number, day: number) => new Date(0).setUTCFullYear(y, month, day);
  const m = DATE.exec(raw);
  const wrong = () =>
    badRequest(
      `${name}: a FHIR date or dateTime (a time needs seconds' or minutes' precision and a zone) with an optional prefix eq ne gt lt ge le sa eb ap`,
      name,
    );
  if (!m) throw wrong();
  const [, prefix = 'eq', y, mo, d, hh, mi, ss, fraction, zone] = m;
  const year = Number(y);
  const month = mo === undefined ? 1 : Number(mo);
  const day = d === undefined ? 1 : Number(d);
  if (month < 1 || month > 12 || day < 1 || day > new Date(utc(year, month, 0)).getUTCDate()) throw wrong();
  let lo: number;
  let hi: number;
  if (hh !== undefined) {
    if (Number(hh) > 23 || Number(mi) > 59 || (ss !== undefined && Number(ss) > 59)) throw wrong();
    lo = Date.parse(`${y}-${mo}-${d}T${hh}:${mi}:${ss ?? '00'}${zone}`);
    if (Number.isNaN(lo)) throw wrong();
    if (fraction === undefined) hi = lo + (ss !== undefined ? 1000 : 60_000);
    else {
      // n fraction digits name [f, f + 1) in units of 10^-n s (search.html#date: the implicit
      // range of the value's precision). In ms: exact for n <= 3; below a millisecond the bounds
      // are rounded up, as the stored instants are whole ms (t >= x exactly when t >= ceil(x)).
      const digits = fraction.slice(1);
      const f = Number(digits);
      const n = digits.length;
      if (n <= 3) {
        const unit = 10 ** (3 - n);
        hi = lo + (f + 1) * unit;
        lo += f * unit;
      } else {
        const per = 10 ** (n - 3); // units per ms
        hi = lo + Math.ceil((f + 1) / per);
        lo += Math.ceil(f / per);
      }
    }
  } else if (d !== undefined) {
    lo = utc(year, month - 1, day);
    hi = utc(year, month - 1, day + 1);
  } else if (mo !== undefined) {
    lo = utc(year, month - 1, 1);
    hi = utc(year, month, 1);
  } else {
    lo = utc(year, 0, 1);
    hi = utc(year + 1, 0, 1);
  }
  switch (prefix) {
    case 'ne':
      return { from: lo, before: hi, not: true };
    case 'gt':
    case 'sa':
      return { from: hi };
    case 'lt':
    case 'eb':
      return { before: lo };
    case 'ge':
      return { from: lo };
    case 'le':
      return { before: hi };
    case 'ap': {
      const slack = Math.ceil(0.1 * Math.abs(now - lo));
      return { from: lo - slack, before: hi + slack };
    }
    default:
      return { from: lo, before: hi };
  }
}

function push<T>(groups: T[][] | undefined, group: T[]): T[][] {
  return [...(groups ?? []), group];
}

/** Applies one value of a filter parameter. */
function applyFilter(
  parsed: ParsedSearch,
  target: Target,
  name: string,
  raw: string,
  options: SearchOptions,
): void {
  const f = parsed.filters;
  switch (target) {
    case 'id':
      f.ids = push(
        f.ids,
        values(name, raw).map((v) => id(name, unescape(v))),
      );
      return;
    case 'request': {
      const ids = values(name, raw)
        .map((v) => requestId(name, unescape(v), options.baseUrl))
        .filter((v) => v !== undefined);
      // Only references to other servers' requests: nothing matches this repetition (AND).
      if (ids.length === 0) parsed.matchesNothing = true;
      else f.requests = push(f.requests, ids);
      return;
    }
    case 'patient':
      f.patient = push(
        f.patient,
        values(name, raw).map((v) => token(name, v)),
      );
      return;
    case 'requestIdentifier':
    case 'nothing': {
      const tokens = values(name, raw).map((v) => token(name, v));
      if (target === 'nothing') parsed.matchesNothing = true;
      else f.requestIdentifier = push(f.requestIdentifier, tokens);
      return;
    }
    case 'insurer':
      f.insurer = push(
        f.insurer,
        values(name, raw).map((v) => unescape(v).trim()),
      );
      return;
    case 'outcome':
      f.outcome = push(
        f.outcome,
        values(name, raw).map((v) => {
          const outcome = OUTCOMES.find((o) => o === unescape(v));
          if (!outcome) throw badRequest(`${name} is one of ${OUTCOMES.join(', ')}`, name);
          return outcome;
        }),
      );
      return;
    case 'created':
      f.created = [...(f.created ?? []), dateRange(name, raw)];
      return;
    case 'lastUpdated':
      f.lastUpdated = [...(f.lastUpdated ?? []), dateRange(name, raw)];
      return;
    case 'serviced':
      if (!/^(eq|gt|lt|ge|le)?\d/.test(raw))
        throw badRequest(`${name}: the prefixes served are eq, gt, lt, ge and le`, name);
      parsed.serviced = [...(parsed.serviced ?? []), { ...dateRange(name, raw), local: !raw.includes('T') }];
      return;
    case 'batch':
      parsed.batches = push(
        parsed.batches,
        values(name, raw).map((v) => id(name, unescape(v))),
      );
      return;
  }
}

function whole(name: string, raw: string, max: number): number {
  if (!/^\d+$/.test(raw)) throw badRequest(`${name} must be a whole number`, name);
  return Math.min(Number(raw), max);
}

/** What a resource type's search serves besides its parameters. */
export interface SearchOptions {
  type: SubsetType;
  /** The `_include` value served, if any. */
  include?: string;
  /** The `_revinclude` value served, if any. */
  revInclude?: string;
  sortable: readonly SearchSort['field'][];
  /** This service's base URL: an absolute reference is local only under `${baseUrl}/fhir/`. */
  baseUrl?: string;
}

/**
 * Parses a search of one resource type (`options`: what it serves besides its parameters).
 */
export function parseSearch(req: FhirRequest, table: ParamTable, options: SearchOptions): ParsedSearch {
  let pairs = 0;
  for (const [name, value] of Object.entries(req.query)) {
    pairs += Array.isArray(value) ? value.length : 1;
    if (pairs > MAX_PAIRS)
      throw new OperationOutcomeError(
        outcome('too-costly', `A search takes at most ${MAX_PAIRS} query parameters; ${name} is past it`, {
          expression: [name],
        }),
        400,
      );
  }
  const strict = parsePrefer(req.prefer).handling === 'strict';
  const parsed: ParsedSearch = {
    filters: {},
    matchesNothing: false,
    count: DEFAULT_COUNT,
    offset: 0,
    sort: [],
    total: true,
    countOnly: false,
    includeRequest: false,
    used: new URLSearchParams(),
  };
  const result = new URLSearchParams();
  // Strict handling refuses what lenient handling ignores (search.html#errors).
  const unsupported = (name: string, why: string) => {
    if (strict) throw badRequest(`${name}: ${why} (Prefer: handling=strict)`, name);
  };
  for (const [name, value] of Object.entries(req.query)) {
    if (value === undefined) continue;
    const raws = (Array.isArray(value) ? value : [value]).filter((raw) => raw !== '');
    if (raws.length === 0) continue;
    // Own keys only: a query key such as `constructor` is not a parameter.
    const target = Object.hasOwn(table, name) ? table[name] : undefined;
    if (target !== undefined) {
      for (const raw of raws) {
        applyFilter(parsed, target, name, raw, options);
        parsed.used.append(name, raw);
      }
      continue;
    }
    if (RESULT_PARAMS.has(name)) {
      if (raws.length > 1) throw badRequest(`Give ${name} once`, name);
      applyResult(parsed, name, raws[0]!, options, unsupported, result);
      continue;
    }
    if (FORMAT_PARAMS.has(name)) continue;
    const base = name.split(/[:.]/)[0]!;
    if (base !== name && (Object.hasOwn(table, base) || RESULT_PARAMS.has(base)))
      throw badRequest(`${name}: ${base} takes no such modifier or chain here`, name);
    unsupported(name, 'this server does not know the parameter');
  }
  if (parsed.countOnly) parsed.count = 0;
  if (result.has('_elements') && parsed.subset?.kind !== 'elements')
    throw badRequest('Give _summary or _elements, not both', '_elements');
  for (const [name, value] of result) parsed.used.append(name, value);
  return parsed;
}

function applyResult(
  parsed: ParsedSearch,
  name: string,
  raw: string,
  options: SearchOptions,
  unsupported: (name: string, why: string) => void,
  used: URLSearchParams,
): void {
  switch (name) {
    case '_count':
      parsed.count = whole(name, raw, MAX_COUNT);
      if (parsed.count === 0) parsed.countOnly = true;
      return; // written by the link builder
    case '_offset':
      parsed.offset = whole(name, raw, MAX_OFFSET);
      return; // written by the link builder
    case '_sort':
      parsed.sort = raw.split(',').map((key) => {
        const field = key.replace(/^-/, '');
        const found = options.sortable.find((s) => (s === 'lastUpdated' ? '_lastUpdated' : s) === field);
        if (!found) throw badRequest(`_sort: one of ${options.sortable.join(', ')}, - for descending`, name);
        return { field: found, descending: key.startsWith('-') };
      });
      used.set(name, raw);
      return;
    case '_total':
      if (!['none', 'estimate', 'accurate'].includes(raw))
        throw badRequest('_total is one of none, estimate, accurate', name);
      parsed.total = raw !== 'none';
      used.set(name, raw);
      return;
    case '_summary':
      if (raw === 'count') parsed.countOnly = true;
      else if (raw === 'true') parsed.subset = { kind: 'summary' };
      else if (raw === 'data') parsed.subset = { kind: 'data' };
      else if (raw === 'text') parsed.subset = { kind: 'text' };
      else if (raw !== 'false') throw badRequest('_summary is one of true, text, data, count, false', name);
      used.set(name, raw);
      return;
    case '_elements': {
      if (parsed.subset) throw badRequest('Give _summary or _elements, not both', name);
      const names = raw.split(',').map((element) => element.trim());
      const known = elementsOf(options.type);
      const unknown = names.find((element) => !known.has(element));
      if (unknown !== undefined)
        throw badRequest(`_elements: ${options.type} has no element "${unknown.slice(0, 40)}"`, name);
      parsed.subset = { kind: 'elements', names };
      used.set(name, raw);
      return;
    }
    case '_include':
      if (options.include !== undefined && raw === options.include) {
        parsed.includeRequest = true;
        used.set(name, raw);
        return;
      }
      return unsupported(name, `only ${options.include ?? 'no _include'} is supported`);
    case '_revinclude':
      if (options.revInclude !== undefined && raw === options.revInclude) {
        parsed.revIncludeResponses = true;
        used.set(name, raw);
        return;
      }
      return unsupported(name, `only ${options.revInclude ?? 'no _revinclude'} is supported`);
  }
}
