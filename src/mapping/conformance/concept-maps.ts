/**
 * The code tables of mappings/ published as R4 ConceptMaps (https://hl7.org/fhir/R4/conceptmap.html),
 * served at /fhir/ConceptMap/{id} beside the CodeSystems, so a client can see how the service
 * translates codes in both directions:
 * - service-category-to-benefit-category (mappings/service-categories.json): a portal benefit label
 *   (by the keywords it contains) -> the service's own service-category code and, where one fits,
 *   HL7 ex-benefitcategory; and service-category -> ex-benefitcategory;
 * - benefit-category-to-visit-type: CoverageEligibilityRequest.item.category
 *   (mappings/visit-types.json) -> the upstream request's visit_type, with the service asked
 *   about (extra_args.title) in the comment.
 */
import type { CodeSystem, CodeSystemConcept, ConceptMap, ConceptMapGroup } from 'fhir/r4.js';
import { CANONICAL_BASE, canonical } from '../../fhir/canonical.js';
import { visitTypeGroups } from '../request/tables.js';
import type { CommonFields } from './operations.js';
import { BENEFIT_CATEGORY_SYSTEM, SERVICE_CATEGORY_SYSTEM } from '../response/codes.js';
import type { ServiceCategory } from '../response/vocabulary.js';
import { normalizeLabel, serviceCategories } from '../response/vocabulary.js';

/** Not a FHIR code system: the values of the upstream's request_dump.visit_type. */
export const UPSTREAM_VISIT_TYPE = `${CANONICAL_BASE}/upstream/visit_type`;

/**
 * Not a FHIR code system: the payer portal's benefit labels (copay_details[].visit_type,
 * benefits[].service_category_*, values_to_fill keys), each code being a keyword of the table.
 */
export const UPSTREAM_SERVICE_LABEL = `${CANONICAL_BASE}/upstream/service_category_label`;

/** Every keyword of the table with its category, in table order (the first match wins). */
function keywords(): { keyword: string; category: ServiceCategory }[] {
  const seen = new Set<string>();
  return serviceCategories().flatMap((category) =>
    category.keywords.flatMap((keyword) => {
      const code = normalizeLabel(keyword);
      if (code === '' || seen.has(code)) return [];
      seen.add(code);
      return [{ keyword: code, category }];
    }),
  );
}

/** A keyword names its category exactly ("dental" -> Dental) or a narrower thing ("orthodontic"). */
function keywordEquivalence(keyword: string, category: ServiceCategory): 'equivalent' | 'wider' {
  return keyword === normalizeLabel(category.display) ? 'equivalent' : 'wider';
}

const common = { status: 'active' as const, publisher: 'fhir-eligibility-adapter', experimental: false };

/** Portal label keyword -> our service-category code; a label with no keyword is "other". */
function labelToServiceCategory(): ConceptMapGroup {
  const other = serviceCategories().find((c) => c.code === 'other');
  return {
    source: UPSTREAM_SERVICE_LABEL,
    target: SERVICE_CATEGORY_SYSTEM,
    element: keywords().map(({ keyword, category }) => ({
      code: keyword,
      target: [
        {
          code: category.code,
          display: category.display,
          equivalence: keywordEquivalence(keyword, category),
        },
      ],
    })),
    ...(other ? { unmapped: { mode: 'fixed' as const, code: other.code, display: other.display } } : {}),
  };
}

/** Portal label keyword -> ex-benefitcategory, for the categories that have an HL7 code. */
function labelToBenefitCategory(): ConceptMapGroup {
  return {
    source: UPSTREAM_SERVICE_LABEL,
    target: BENEFIT_CATEGORY_SYSTEM,
    element: keywords()
      .filter(({ category }) => category.benefitCategory !== undefined)
      .map(({ keyword, category }) => ({
        code: keyword,
        target: [{ code: category.benefitCategory, equivalence: 'wider' as const }],
      })),
  };
}

function serviceCategoryMap(): ConceptMap {
  const group: ConceptMapGroup = {
    source: SERVICE_CATEGORY_SYSTEM,
    target: BENEFIT_CATEGORY_SYSTEM,
    element: serviceCategories().map((c) => ({
      code: c.code,
      display: c.display,
      target: c.benefitCategory
        ? [{ code: c.benefitCategory, equivalence: 'equivalent' as const }]
        : [
            {
              equivalence: 'unmatched' as const,
              comment:
                'No ex-benefitcategory code fits; the item carries only the service-category code and the portal label.',
            },
          ],
    })),
  };
  return {
    resourceType: 'ConceptMap',
    id: 'service-category-to-benefit-category',
    url: canonical('ConceptMap', 'service-category-to-benefit-category'),
    ...common,
    name: 'ServiceCategoryToBenefitCategory',
    title: 'Service categories of the payer portal to HL7 benefit categories',
    description:
      'How CoverageEligibilityResponse.insurance.item.category is coded. A portal benefit label is lower-cased, punctuation becomes spaces, and the first keyword (in the order listed) that occurs in it as whole words gives its service-category code (no keyword: other) and, where one fits, its ex-benefitcategory code; the item carries both, with the label as text. The last group lists each service category with its ex-benefitcategory code.',
    group: [labelToServiceCategory(), labelToBenefitCategory(), group],
  };
}

function visitTypeMap(): ConceptMap {
  return {
    resourceType: 'ConceptMap',
    id: 'benefit-category-to-visit-type',
    url: canonical('ConceptMap', 'benefit-category-to-visit-type'),
    ...common,
    name: 'BenefitCategoryToVisitType',
    title: 'Requested service category to the upstream visit type',
    description:
      'How CoverageEligibilityRequest.item.category becomes the upstream visit_type (only OUTPATIENT is documented upstream) and extra_args.title (the service asked about). A category not listed is answered 422.',
    group: visitTypeGroups().map((g) => ({
      source: g.source,
      target: UPSTREAM_VISIT_TYPE,
      element: g.element.map((e) => ({
        code: e.code,
        ...(e.display ? { display: e.display } : {}),
        target: [
          {
            code: e.visitType,
            equivalence: 'wider' as const,
            comment: `extra_args.title "${e.title}", value "${e.value}"${e.isMaternity ? ', is_maternity true' : ''}`,
          },
        ],
      })),
    })),
  };
}

/** The CodeSystem of codes some table of mappings/ gives, each with its definition. */
function upstreamCodeSystem(
  fields: CommonFields,
  id: string,
  url: string,
  text: { name: string; title: string; description: string },
  concept: CodeSystemConcept[],
): CodeSystem {
  return {
    resourceType: 'CodeSystem',
    id,
    url,
    ...fields,
    ...text,
    caseSensitive: true,
    content: 'complete',
    count: concept.length,
    concept,
  };
}

/**
 * The two systems the ConceptMaps map from and to that are the upstream's, not FHIR's: its
 * visit_type values (mappings/visit-types.json) and the keywords of the portal's benefit labels
 * (mappings/service-categories.json). Defined so that a validator resolves every system the maps
 * name.
 */
export function upstreamCodeSystems(fields: CommonFields): CodeSystem[] {
  const visitTypes = new Map<string, Set<string>>();
  for (const group of visitTypeGroups())
    for (const e of group.element)
      visitTypes.set(e.visitType, (visitTypes.get(e.visitType) ?? new Set()).add(e.title));
  return [
    upstreamCodeSystem(
      fields,
      'upstream-visit-type',
      UPSTREAM_VISIT_TYPE,
      {
        name: 'UpstreamVisitType',
        title: 'Visit types of the upstream eligibility service',
        description:
          "The values of the upstream request's visit_type that this service sends (mappings/visit-types.json; only OUTPATIENT is documented upstream). Not a FHIR code system of the upstream's own: the adapter names it to say how CoverageEligibilityRequest.item.category is sent (ConceptMap benefit-category-to-visit-type).",
      },
      [...visitTypes].map(([code, titles]) => ({
        code,
        display: code,
        definition: `The upstream visit_type ${code}, sent for: ${[...titles].join(', ')}.`,
      })),
    ),
    upstreamCodeSystem(
      fields,
      'upstream-service-category-label',
      UPSTREAM_SERVICE_LABEL,
      {
        name: 'UpstreamServiceCategoryLabel',
        title: "Keywords of the payer portal's benefit labels",
        description:
          "The keywords this service looks for in a payer portal's benefit label (copay_details[].visit_type, benefits[].service_category_*, values_to_fill keys), lower-cased, punctuation as spaces, in table order (mappings/service-categories.json): the first that occurs in a label as whole words codes it (ConceptMap service-category-to-benefit-category). A label with none is other.",
      },
      keywords().map(({ keyword, category }) => ({
        code: keyword,
        display: keyword,
        definition: `A portal benefit label holding "${keyword}" as whole words: ${category.display}.`,
      })),
    ),
  ];
}

/** The published ConceptMaps. */
export function conceptMaps(): ConceptMap[] {
  return [serviceCategoryMap(), visitTypeMap()];
}
