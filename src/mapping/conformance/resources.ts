/**
 * The conformance resources of the CERs: one StructureDefinition per extension
 * (https://hl7.org/fhir/R4/extensibility.html#define, https://hl7.org/fhir/R4/structuredefinition.html),
 * the CodeSystems of the service's own codes (https://hl7.org/fhir/R4/codesystem.html) and the
 * ValueSet a code-valued sub-extension is bound to. Built once from the tables in mappings/, each
 * read and checked by the module that owns it (loadMappingTable): conformance/*.json here,
 * adapter-errors.json by response/adapter-errors.ts, outcomes.json by response/outcome-rules.ts.
 */
import type {
  CodeSystem,
  CodeSystemConcept,
  ElementDefinition,
  Resource,
  StructureDefinition,
  ValueSet,
} from 'fhir/r4.js';
import { z } from 'zod';
import { canonical } from '../../fhir/canonical.js';
import { loadMappingTable } from '../mapping-table.js';
import { allAdapterErrors } from '../response/adapter-errors.js';
import { EXTENSION_IDS, OUTCOME_SYSTEM, SERVICE_CATEGORY_SYSTEM } from '../response/codes.js';
import { backportResources } from './backport.js';
import { conceptMaps, upstreamCodeSystems } from './concept-maps.js';
import { operationResources } from './operations.js';
import { profileDefinitions } from './profiles.js';
import { searchParameterResources } from './search-parameters.js';
import { outcomeRules } from '../response/outcome-rules.js';
import { serviceCategories } from '../response/vocabulary.js';
import { visitTypeGroups } from '../request/tables.js';

const TYPES = [
  'string',
  'boolean',
  'code',
  'date',
  'unsignedInt',
  'positiveInt',
  'Attachment',
  'Reference',
] as const;
const partSchema = z.strictObject({
  name: z.string().regex(/^[a-z][A-Za-z]+$/),
  type: z.enum(TYPES),
  min: z.literal(1).optional(),
  max: z.literal('*').optional(),
  short: z.string().min(1),
  valueSet: z.string().optional(),
  /** For a Reference value: the resource type it points at. */
  target: z
    .string()
    .regex(/^[A-Z][A-Za-z]+$/)
    .optional(),
});
const extensionSchema = z
  .strictObject({
    id: z.enum(EXTENSION_IDS),
    name: z.string().regex(/^[A-Z][A-Za-z0-9]+$/),
    title: z.string().min(1),
    description: z.string().min(1),
    context: z.array(z.string().min(1)).min(1),
    max: z.literal('*').optional(),
    value: z.enum(TYPES).optional(),
    /** For a Reference value: the resource type it points at. */
    target: z
      .string()
      .regex(/^[A-Z][A-Za-z]+$/)
      .optional(),
    parts: z.array(partSchema).optional(),
  })
  .refine(
    (e) => (e.value === undefined) !== (e.parts === undefined),
    'an extension has a value or parts, not both',
  );
const extensionsTableSchema = z.object({
  description: z.string(),
  version: z.string(),
  date: z.iso.date(),
  publisher: z.string(),
  extensions: z.array(extensionSchema),
});
const conceptSchema = z.strictObject({ code: z.string(), display: z.string(), definition: z.string() });
const codeSystemsTableSchema = z.object({
  description: z.string(),
  codeSystems: z.array(
    z.strictObject({
      id: z.string(),
      name: z.string(),
      title: z.string(),
      description: z.string(),
      valueSet: z.boolean().optional(),
      concepts: z.array(conceptSchema).min(1),
    }),
  ),
});

const extensionsTable = loadMappingTable('conformance/extensions.json', extensionsTableSchema);
const codeSystemsTable = loadMappingTable('conformance/code-systems.json', codeSystemsTableSchema);

/** The version, date, status and publisher every conformance resource of the service carries. */
export const common = {
  version: extensionsTable.version,
  date: extensionsTable.date,
  status: 'active' as const,
  publisher: extensionsTable.publisher,
};

type Extension = z.infer<typeof extensionSchema>;
type Part = z.infer<typeof partSchema>;

function valueElement(
  id: string,
  path: string,
  type: string,
  valueSet?: string,
  target?: string,
): ElementDefinition {
  const element: ElementDefinition = {
    id,
    path,
    min: 1,
    type: [
      target
        ? { code: type, targetProfile: [`http://hl7.org/fhir/StructureDefinition/${target}`] }
        : { code: type },
    ],
  };
  if (valueSet) element.binding = { strength: 'required', valueSet: canonical('ValueSet', valueSet) };
  return element;
}

function partElements(part: Part): ElementDefinition[] {
  const id = `Extension.extension:${part.name}`;
  return [
    {
      id,
      path: 'Extension.extension',
      sliceName: part.name,
      short: part.short,
      definition: part.short,
      min: part.min ?? 0,
      max: part.max ?? '1',
    },
    { id: `${id}.extension`, path: 'Extension.extension.extension', max: '0' },
    { id: `${id}.url`, path: 'Extension.extension.url', fixedUri: part.name },
    valueElement(`${id}.value[x]`, 'Extension.extension.value[x]', part.type, part.valueSet, part.target),
  ];
}

function differential(ext: Extension, url: string): ElementDefinition[] {
  const root: ElementDefinition = {
    id: 'Extension',
    path: 'Extension',
    short: ext.title,
    definition: ext.description,
    min: 0,
    max: ext.max ?? '1',
  };
  if (ext.value) {
    return [
      root,
      { id: 'Extension.extension', path: 'Extension.extension', max: '0' },
      { id: 'Extension.url', path: 'Extension.url', fixedUri: url },
      valueElement('Extension.value[x]', 'Extension.value[x]', ext.value, undefined, ext.target),
    ];
  }
  return [
    root,
    {
      id: 'Extension.extension',
      path: 'Extension.extension',
      slicing: { discriminator: [{ type: 'value', path: 'url' }], rules: 'open' },
    },
    ...(ext.parts ?? []).flatMap(partElements),
    { id: 'Extension.url', path: 'Extension.url', fixedUri: url },
    { id: 'Extension.value[x]', path: 'Extension.value[x]', max: '0' },
  ];
}

function structureDefinition(ext: Extension): StructureDefinition {
  const url = canonical('StructureDefinition', ext.id);
  return {
    resourceType: 'StructureDefinition',
    id: ext.id,
    url,
    ...common,
    name: ext.name,
    title: ext.title,
    description: ext.description,
    fhirVersion: '4.0.1',
    kind: 'complex-type',
    abstract: false,
    context: ext.context.map((expression) => ({ type: 'element' as const, expression })),
    type: 'Extension',
    baseDefinition: 'http://hl7.org/fhir/StructureDefinition/Extension',
    derivation: 'constraint',
    differential: { element: differential(ext, url) },
  };
}

function codeSystem(
  id: string,
  name: string,
  title: string,
  description: string,
  concept: CodeSystemConcept[],
): CodeSystem {
  return {
    resourceType: 'CodeSystem',
    id,
    url: canonical('CodeSystem', id),
    ...common,
    name,
    title,
    description,
    caseSensitive: true,
    content: 'complete',
    count: concept.length,
    concept,
  };
}

/** "member-not-found" -> "Member not found". */
function displayOf(code: string): string {
  const words = code.replace(/-/g, ' ');
  return words.charAt(0).toUpperCase() + words.slice(1);
}

/** Every error code of the service: upstream outcomes (outcomes.json) and adapter failures (adapter-errors.json). */
function outcomeCodeSystem(): CodeSystem {
  const concepts = new Map<string, CodeSystemConcept>();
  for (const rule of outcomeRules()) {
    if (rule.errorCode)
      concepts.set(rule.errorCode, {
        code: rule.errorCode,
        display: displayOf(rule.errorCode),
        definition: rule.text,
      });
  }
  for (const error of allAdapterErrors()) {
    concepts.set(error.code, { code: error.code, display: displayOf(error.code), definition: error.text });
  }
  const cs = codeSystem(
    'adapter-outcome',
    'AdapterOutcome',
    'Eligibility check outcomes without a determination',
    'Why a check made no eligibility determination: an upstream outcome (mappings/outcomes.json) or a failure decided by the adapter (mappings/adapter-errors.json). Used in CoverageEligibilityResponse.error.code and OperationOutcome.issue.details.',
    [...concepts.values()],
  );
  if (cs.url !== OUTCOME_SYSTEM) throw new Error('adapter-outcome CodeSystem URL mismatch');
  return cs;
}

function serviceCategoryCodeSystem(): CodeSystem {
  const cs = codeSystem(
    'service-category',
    'ServiceCategory',
    'Payer portal service categories',
    'Service categories of UAE payer portals, for CoverageEligibilityResponse.insurance.item.category. Where http://terminology.hl7.org/CodeSystem/ex-benefitcategory has a code it is given too.',
    serviceCategories().map((c) => ({ code: c.code, display: c.display, definition: c.display })),
  );
  if (cs.url !== SERVICE_CATEGORY_SYSTEM) throw new Error('service-category CodeSystem URL mismatch');
  return cs;
}

/** This service's own visit-type codes, which a request may send in item.category (mappings/visit-types.json). */
function visitTypeCodeSystem(): CodeSystem {
  const url = canonical('CodeSystem', 'visit-type');
  const rows = visitTypeGroups().find((g) => g.source === url)?.element ?? [];
  return codeSystem(
    'visit-type',
    'VisitType',
    'Visit types',
    'Visit types a request may name directly in CoverageEligibilityRequest.item.category, each sent to the payer portal as the visit type and service of mappings/visit-types.json (ConceptMap benefit-category-to-visit-type).',
    rows.map((r) => ({
      code: r.code,
      display: r.display ?? r.title,
      definition: `Asks the payer portal about ${r.title} (visit type ${r.visitType}).`,
    })),
  );
}

function valueSetOf(id: string, name: string, title: string, description: string): ValueSet {
  return {
    resourceType: 'ValueSet',
    id,
    url: canonical('ValueSet', id),
    ...common,
    name,
    title,
    description,
    compose: { include: [{ system: canonical('CodeSystem', id) }] },
  };
}

let built: Resource[] | null = null;

/** The StructureDefinitions, CodeSystems and ValueSets of this service, for /fhir/{type}/{id}. */
export function conformanceResources(): Resource[] {
  if (built) return built;
  const tables = codeSystemsTable.codeSystems;
  built = [
    ...profileDefinitions(common),
    ...extensionsTable.extensions.map(structureDefinition),
    outcomeCodeSystem(),
    serviceCategoryCodeSystem(),
    visitTypeCodeSystem(),
    ...tables.map((t) => codeSystem(t.id, t.name, t.title, t.description, t.concepts)),
    // A ValueSet of all codes, for a code-valued sub-extension bound to it.
    ...tables.filter((t) => t.valueSet).map((t) => valueSetOf(t.id, t.name, t.title, t.description)),
    ...conceptMaps(),
    // The upstream's systems the ConceptMaps name (issue 43).
    ...upstreamCodeSystems(common),
    // $submit and $validate (issue 17).
    ...operationResources(common),
    // `serviced` on CoverageEligibilityRequest (issue 26).
    ...searchParameterResources(common),
    // What the Subscriptions backport defines and the service uses, copied in (issue 33).
    ...backportResources(),
  ];
  return built;
}
