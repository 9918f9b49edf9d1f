/**
 * The request-mapping tables in mappings/ (identifiers, payers, visit types), loaded and checked
 * with zod once at module load: a broken table stops start-up with a message naming the file and
 * the element. Code walks these tables; it does not spell the mappings out in branches.
 */
import type { Coding, Identifier } from 'fhir/r4.js';
import { z } from 'zod';
import { loadMappingTable } from '../mapping-table.js';
import { CANONICAL_BASE } from '../../fhir/canonical.js';

export const V2_0203 = 'http://terminology.hl7.org/CodeSystem/v2-0203';

const IDENTIFIER_KINDS = ['emirates-id', 'card-number', 'practitioner-licence', 'payer-code'] as const;
export type IdentifierKind = (typeof IDENTIFIER_KINDS)[number];

/** `{canonical}` in a table stands for the service's canonical base. */
const uri = z
  .string()
  .min(1)
  .transform((value) => value.replace('{canonical}', CANONICAL_BASE));

const identifiersSchema = z.object({
  description: z.string().min(1),
  idTypes: z.object({ 'emirates-id': z.string().min(1), 'card-number': z.string().min(1) }),
  group: z
    .array(
      z.object({
        source: uri,
        element: z
          .array(z.object({ code: z.string().min(1), display: z.string(), target: z.enum(IDENTIFIER_KINDS) }))
          .min(1),
      }),
    )
    .min(1),
  systems: z.array(
    z.object({
      system: uri,
      target: z.enum(IDENTIFIER_KINDS),
      assumption: z.boolean(),
      description: z.string().min(1),
    }),
  ),
});

const payersSchema = z.object({
  description: z.string().min(1),
  identifierSystem: uri,
  payerCodeSystems: z.array(z.object({ system: uri, assumption: z.boolean(), description: z.string() })),
  payers: z.array(z.object({ code: z.string().min(1), display: z.string().min(1) })).min(1),
});

const visitTypeSchema = z.object({
  visitType: z.string().min(1),
  title: z.string().min(1),
  value: z.string().min(1),
  isMaternity: z.boolean().optional(),
});
export type VisitType = z.infer<typeof visitTypeSchema>;

const visitTypesSchema = z.object({
  description: z.string().min(1),
  default: visitTypeSchema,
  frontDesk: z.object({
    description: z.string().min(1),
    source: uri,
    rows: z.array(z.object({ code: z.string().min(1), serviceCategory: z.string().min(1) })).min(1),
  }),
  group: z
    .array(
      z.object({
        source: uri,
        element: z.array(visitTypeSchema.extend({ code: z.string().min(1), display: z.string() })).min(1),
      }),
    )
    .min(1),
});

const identifiers = loadMappingTable('identifiers.json', identifiersSchema);
const payers = loadMappingTable('payers.json', payersSchema);
const visitTypes = loadMappingTable('visit-types.json', visitTypesSchema);

const kindByTypeCode = new Map(
  identifiers.group.flatMap((g) => g.element.map((e) => [`${g.source}|${e.code}`, e.target] as const)),
);
const kindBySystem = new Map(identifiers.systems.map((s) => [s.system, s.target] as const));
const payerDisplayByCode = new Map(payers.payers.map((p) => [p.code.toUpperCase(), p.display] as const));
const payerCodeSystems = new Set(payers.payerCodeSystems.map((s) => s.system));
const visitTypeByCoding = new Map(
  visitTypes.group.flatMap((g) => g.element.map((e) => [`${g.source}|${e.code}`, e] as const)),
);

/** The system this service puts on payer-code identifiers it emits (CoverageEligibilityResponse.insurer). */
export const PAYER_CODE_SYSTEM = payers.identifierSystem;

/** What an identifier is: by Identifier.type (v2-0203) first, by Identifier.system second. */
export function identifierKind(identifier: Identifier): IdentifierKind | undefined {
  for (const coding of Array.isArray(identifier.type?.coding) ? identifier.type.coding : []) {
    const kind = kindByTypeCode.get(`${coding.system ?? ''}|${coding.code ?? ''}`);
    if (kind) return kind;
  }
  return identifier.system ? kindBySystem.get(identifier.system) : undefined;
}

/** request_dump.id_type for a patient identifier kind. */
export function idTypeFor(kind: 'emirates-id' | 'card-number'): string {
  return identifiers.idTypes[kind];
}

/** Display name of a known payer code; undefined for codes the table does not list (they pass through). */
export function payerDisplay(code: string): string | undefined {
  return payerDisplayByCode.get(code.toUpperCase());
}

/** The payers known by name (mappings/payers.json), in the table's order: the front-desk page's list. */
export function knownPayers(): readonly { code: string; display: string }[] {
  return payers.payers;
}

/** True when values of this Identifier.system are payer codes (mappings/payers.json). */
export function isPayerCodeSystem(system: string | undefined): boolean {
  return system !== undefined && payerCodeSystems.has(system);
}

/** The visit type of a category coding; undefined when the table does not know it. */
export function visitTypeOf(coding: Coding): VisitType | undefined {
  return visitTypeByCoding.get(`${coding.system ?? ''}|${coding.code ?? ''}`);
}

/** The visit type used when the request names no category. */
export const DEFAULT_VISIT_TYPE: VisitType = visitTypes.default;

const deskVisitTypes = (() => {
  const { source, rows } = visitTypes.frontDesk;
  const codes = rows.map((r) => r.code);
  if (new Set(codes).size !== codes.length)
    throw new Error('visit-types.json: frontDesk.rows has a duplicate');
  return rows.map(({ code, serviceCategory }) => {
    const row = visitTypeByCoding.get(`${source}|${code}`);
    if (!row) throw new Error(`visit-types.json: frontDesk code ${code} is not a row of ${source}`);
    return { system: source, code, display: row.display || row.title, serviceCategory };
  });
})();

/**
 * The visit types the front-desk page offers, in the table's order (the first is the default):
 * each row of `frontDesk.rows`, found in its group, with the service-category code the page's
 * estimate asks about. A code listed twice or missing from the group stops the service at
 * start-up, like any other error in a mapping table.
 */
export function frontDeskVisitTypes(): readonly {
  system: string;
  code: string;
  display: string;
  serviceCategory: string;
}[] {
  return deskVisitTypes;
}

/** The visit-type table's groups (source code system -> rows), for the published ConceptMap. */
export function visitTypeGroups(): readonly {
  source: string;
  element: readonly (VisitType & { code: string; display?: string })[];
}[] {
  return visitTypes.group;
}
