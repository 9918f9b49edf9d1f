/**
 * GET /fhir/DocumentReference?patient=<system>|<value>&date=...  and  ?related=CoverageEligibilityResponse/<id>
 * (docs/evidence.md, docs/search.md): the tenant's kept documents, one DocumentReference each,
 * newest kept first, in a searchset Bundle (https://hl7.org/fhir/R4/documentreference.html). A
 * document not kept (pending, or could not be kept) is never listed. Attachment.hash is the SHA-1
 * of the bytes, base64, as R4 defines it (https://hl7.org/fhir/R4/datatypes.html#Attachment).
 */
import type { Bundle, BundleEntry, DocumentReference } from 'fhir/r4.js';
import { escapeXml, generatedNarrative } from '../fhir/xhtml.js';
import type { TokenValue } from '../checks/store/check-store.js';
import type { Evidence, EvidenceFilters, EvidenceStore } from '../checks/store/evidence-store.js';
import { badRequest } from '../fhir/outcomes.js';
import { dateRange } from './search/params.js';
import type { FhirAnswer, FhirRequest } from './types.js';

const KNOWN = new Set(['patient', 'date', 'related', '_count', '_offset', '_format']);
const ID = /^[A-Za-z0-9\-.]{1,64}$/;
const DEFAULT_COUNT = 50;
const MAX_COUNT = 100;
/** The most comma-separated values of one parameter, and the most times `date` may repeat. */
const MAX_VALUES = 100;
const MAX_DATES = 4;

/** The one occurrence of a parameter, as its comma-separated values. */
function values(req: FhirRequest, name: string): string[] | undefined {
  const raw = req.query[name];
  if (raw === undefined) return undefined;
  if (Array.isArray(raw)) throw badRequest(`${name}: give it once (comma-separated values are OR)`, name);
  const list = raw.split(',');
  if (list.some((v) => v.trim() === '')) throw badRequest(`${name}: an empty value`, name);
  if (list.length > MAX_VALUES) throw badRequest(`${name}: at most ${MAX_VALUES} values`, name);
  return list;
}

/** `system|value` (or a bare value, any system): the patient identifier the check was made for. */
function patientToken(raw: string): TokenValue {
  const parts = raw.split('|');
  if (parts.length === 1) return { value: raw };
  const [system = '', value = ''] = parts;
  if (parts.length !== 2 || value === '')
    throw badRequest('patient: the patient identifier as <system>|<value>', 'patient');
  return { system, value };
}

/** `CoverageEligibilityResponse/<id>`, or an absolute URL of one on this server: the check id. */
function relatedCheck(raw: string, baseUrl: string): string | null {
  const match = /^(?:(.*)\/)?CoverageEligibilityResponse\/([^/]+)$/.exec(raw);
  if (!match || !ID.test(match[2] ?? ''))
    throw badRequest('related: a reference such as CoverageEligibilityResponse/<id>', 'related');
  const at = match[1];
  if (at === undefined) return match[2]!;
  if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(at))
    throw badRequest('related: a reference such as CoverageEligibilityResponse/<id>', 'related');
  // Another server's CER: a valid reference that no document here names.
  return `${at}/` === `${baseUrl.replace(/\/+$/, '')}/fhir/` ? match[2]! : null;
}

function whole(req: FhirRequest, name: string, fallback: number, max: number): number {
  const list = values(req, name);
  if (!list) return fallback;
  const [raw = ''] = list;
  if (list.length !== 1 || !/^\d{1,6}$/.test(raw)) throw badRequest(`${name}: a whole number`, name);
  return Math.min(max, Number(raw));
}

interface Parsed {
  filters: EvidenceFilters;
  matchesNothing: boolean;
  count: number;
  offset: number;
  applied: URLSearchParams;
}

function parse(req: FhirRequest, baseUrl: string): Parsed {
  for (const name of Object.keys(req.query)) {
    // A modifier is refused, never ignored: ignoring it would answer wider than asked
    // (https://hl7.org/fhir/R4/search.html#errors).
    const base = name.split(':')[0] ?? name;
    if (name !== base && KNOWN.has(base)) throw badRequest(`${name}: modifiers are not supported`, name);
    if (!KNOWN.has(name) && req.prefer?.includes('handling=strict'))
      throw badRequest(`Unknown search parameter ${name}`, name);
  }
  const filters: EvidenceFilters = {};
  const applied = new URLSearchParams();
  let matchesNothing = false;
  const patient = values(req, 'patient');
  if (patient) {
    filters.patient = patient.map(patientToken);
    applied.set('patient', patient.join(','));
  }
  const related = values(req, 'related');
  if (related) {
    const ids = related.map((raw) => relatedCheck(raw, baseUrl)).filter((id): id is string => id !== null);
    if (ids.length === 0) matchesNothing = true;
    filters.checkIds = ids;
    applied.set('related', related.join(','));
  }
  const date = req.query.date;
  if (date !== undefined) {
    const list = Array.isArray(date) ? date : [date];
    if (list.length > MAX_DATES)
      throw badRequest(`date: at most ${MAX_DATES} times (a range needs two)`, 'date');
    filters.keptAt = list.map((d) => dateRange('date', d));
    for (const d of list) applied.append('date', d);
  }
  const count = whole(req, '_count', DEFAULT_COUNT, MAX_COUNT);
  const offset = whole(req, '_offset', 0, 1_000_000);
  return { filters, matchesNothing, count, offset, applied };
}

/** One kept document as a DocumentReference (docs/evidence.md). */
export function documentReferenceOf(row: Evidence): DocumentReference {
  const keptAt = new Date(row.keptAt ?? row.createdAt).toISOString();
  return {
    resourceType: 'DocumentReference',
    id: row.id,
    meta: { lastUpdated: keptAt },
    text: generatedNarrative(
      `<p><b>Document kept</b> ${escapeXml(keptAt)}: ${escapeXml(row.label ?? 'no label')}</p><ul><li>${escapeXml(
        row.contentType ?? 'unknown type',
      )}${row.size !== null ? `, ${row.size} bytes` : ''}</li><li>Of CoverageEligibilityResponse/${escapeXml(row.checkId)}</li></ul>`,
    ),
    status: 'current',
    type: { text: row.label },
    date: keptAt,
    ...(row.label ? { description: row.label } : {}),
    content: [
      {
        attachment: {
          ...(row.contentType ? { contentType: row.contentType } : {}),
          url: `Binary/${row.id}`,
          ...(row.size !== null ? { size: row.size } : {}),
          ...(row.sha1 ? { hash: row.sha1 } : {}),
          ...(row.filename ? { title: row.filename } : {}),
          creation: new Date(row.createdAt).toISOString(),
        },
      },
    ],
    context: { related: [{ reference: `CoverageEligibilityResponse/${row.checkId}` }] },
  };
}

/** GET /fhir/DocumentReference?...: a searchset Bundle of the tenant's kept documents. */
export async function searchDocumentReferences(
  req: FhirRequest,
  evidence: EvidenceStore,
  baseUrl: string,
): Promise<FhirAnswer> {
  const { filters, matchesNothing, count, offset, applied } = parse(req, baseUrl);
  // One more than the page: whether there is a next page, without a count of all matches.
  const found =
    matchesNothing || count === 0 ? [] : await evidence.search(req.tenant.id, filters, count + 1, offset);
  const rows = found.slice(0, count);
  const url = (at: number) => {
    const params = new URLSearchParams(applied);
    params.set('_count', String(count));
    if (at > 0) params.set('_offset', String(at));
    return `${baseUrl}/fhir/DocumentReference?${params.toString()}`;
  };
  const entry: BundleEntry[] = rows.map((row) => ({
    fullUrl: `${baseUrl}/fhir/DocumentReference/${row.id}`,
    resource: documentReferenceOf(row),
    search: { mode: 'match' },
  }));
  const bundle: Bundle = {
    resourceType: 'Bundle',
    type: 'searchset',
    link: [{ relation: 'self', url: url(offset) }],
    ...(entry.length ? { entry } : {}),
  };
  if (found.length > count) bundle.link?.push({ relation: 'next', url: url(offset + count) });
  if (offset > 0) bundle.link?.push({ relation: 'previous', url: url(Math.max(0, offset - count)) });
  return { status: 200, body: bundle };
}
