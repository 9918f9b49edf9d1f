/**
 * The narrative (`text`) of every CoverageEligibilityResponse (src/mapping/response/narrative.ts):
 * every outcome, multi-card, GP referral, search-all, and upstream text with XML specials. Each CER
 * still passes the real FHIR validator; the XHTML itself is parsed by Chromium's XML parser in
 * test/browser/app.test.ts (no XML parser is installed for Node).
 */
import { readFileSync } from 'node:fs';
import type { CoverageEligibilityResponse, DocumentReference } from 'fhir/r4.js';
import { describe, expect, it } from 'vitest';
import { CANONICAL_BASE } from '../../src/fhir/canonical.js';
import {
  adapterErrorCer,
  mapEnvelope,
  queuedCer,
  stillCheckingCer,
} from '../../src/mapping/response/index.js';
import { narrativeOf, withNarrative } from '../../src/mapping/response/narrative.js';
import { escapeXml } from '../../src/mapping/response/xhtml.js';
import { cerContext } from '../support/cer-context.js';
import type { Envelope } from '../../src/upstream/contract.js';
import { envelopeSchema } from '../../src/upstream/contract.js';
import { expectValidFhir } from '../support/fhir.js';
import { NARRATIVE_ELEMENTS } from '../support/narrative.js';

const MAPPING_DIR = new URL('../fixtures/mapping/', import.meta.url);

/** The mapping tests' context asking benefits only (discovery for a search-all), without a date of service. */
const ctx = (isSearchAll = false) =>
  cerContext(isSearchAll, {
    id: undefined,
    purpose: isSearchAll ? ['discovery'] : ['benefits'],
    servicedDate: undefined,
  });

const fixture = (name: string): Envelope =>
  envelopeSchema.parse(JSON.parse(readFileSync(new URL(`${name}.json`, MAPPING_DIR), 'utf8')));

const map = (name: string, isSearchAll = false) => mapEnvelope(fixture(name), ctx(isSearchAll));

/** The narrative's text content, tags removed and the five XML entities read back. */
function textOf(cer: CoverageEligibilityResponse): string {
  return (cer.text?.div ?? '')
    .replace(/<[^>]+>/g, ' ')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&')
    .replace(/\s+/g, ' ');
}

/** The narrative's tables by block title, each as rows of cell texts (header row first). */
function blocksOf(cer: CoverageEligibilityResponse): Map<string, string[][]> {
  const div = cer.text?.div ?? '';
  const blocks = new Map<string, string[][]>();
  for (const [, title, table] of div.matchAll(/<h3>(.*?)<\/h3><table>(.*?)<\/table>/g))
    blocks.set(title ?? '', tableOf(table ?? ''));
  return blocks;
}

/** The rows of a table (or of all tables) as cell texts (header row first), entities read back. */
function tableOf(div: string): string[][] {
  return [...div.matchAll(/<tr>(.*?)<\/tr>/g)].map((tr) =>
    [...(tr[1] ?? '').matchAll(/<t[hd]>(.*?)<\/t[hd]>/g)].map((cell) =>
      (cell[1] ?? '')
        .replace(/&lt;/g, '<')
        .replace(/&gt;/g, '>')
        .replace(/&quot;/g, '"')
        .replace(/&#39;/g, "'")
        .replace(/&amp;/g, '&'),
    ),
  );
}

/** What FHIR narrative allows (txt-1, txt-2) as far as this service's narratives go. */
function expectNarrativeRules(cer: CoverageEligibilityResponse): void {
  expect(cer.text?.status).toBe('generated');
  const div = cer.text?.div ?? '';
  expect(div.startsWith('<div xmlns="http://www.w3.org/1999/xhtml">')).toBe(true);
  expect(div.endsWith('</div>')).toBe(true);
  const tags = [...div.matchAll(/<\/?([a-z0-9]+)/g)].map((m) => m[1]);
  for (const tag of tags) expect(NARRATIVE_ELEMENTS).toContain(tag);
  // The only attributes: the xhtml namespace and the documents' links.
  for (const [, name] of div.matchAll(/\s([a-z-]+)="/g)) expect(['xmlns', 'href']).toContain(name);
  expect(div).not.toMatch(/<[^>]*\son[a-z]+=/i);
  // Only the XML entities: no &nbsp; and the like.
  for (const entity of div.match(/&[^;\s]*;/g) ?? [])
    expect(['&amp;', '&lt;', '&gt;', '&quot;', '&#39;']).toContain(entity);
  expect(textOf(cer).trim().length).toBeGreaterThan(0);
  // Small: never a copy of the whole CER.
  expect(div.length).toBeLessThan(JSON.stringify({ ...cer, text: undefined }).length);
  expectValidFhir(cer);
}

describe('the narrative of each outcome', () => {
  it('eligible: the visit summary first, then the word, payer, plan, network, period, the tables per block, GP rule, warnings, checked', () => {
    const cer = map('found-eligible-rich');
    expectNarrativeRules(cer);
    const text = textOf(cer);
    expect(cer.text?.div).toMatch(
      /^<div xmlns="http:\/\/www.w3.org\/1999\/xhtml"><div><h2>What to collect<\/h2><ul><li>/,
    );
    expect(text.trim().startsWith('What to collect Consultation (Outpatient, In-Network): ')).toBe(true);
    expect(text).toContain(' Eligible ');
    expect(text).toMatch(/Payer: \S/);
    expect(text).toMatch(/Plan: \S/);
    expect(text).toMatch(/Network: \S/);
    expect(text).toMatch(/Policy period: \d{4}-\d{2}-\d{2} to \d{4}-\d{2}-\d{2}/);
    expect(text).toContain(
      'A GP referral is required for specialist visits (payer portal: is_gatekeeper = "Yes")',
    );
    expect(text).toContain('Checked: 2026-11-22 10:00 UTC');
    // One table per portal block, in the portal's order, each under its name.
    const blocks = blocksOf(cer);
    expect([...blocks.keys()]).toEqual([
      'Outpatient benefits',
      'Maternity benefits',
      'Specialization benefits',
      'Other benefits (no block named by the portal)',
    ]);
    const outpatient = blocks.get('Outpatient benefits') ?? [];
    const [head, ...body] = outpatient;
    expect(head).toEqual([
      'Service category',
      'Coverage',
      'Copay %',
      'Copay amount',
      'Copay maximum',
      'Currency',
      'Notes',
    ]);
    // The cells themselves: dropping or moving a column fails here; the maximum with its scope.
    expect(body[0]).toEqual([
      'Consultation (In-Network)',
      'Covered',
      '20%',
      '50',
      '100 (per claim)',
      'AED',
      'Specialist consultation requires GP referral; Qualifiers: GP, Specialist; A GP referral is required for specialist visits',
    ]);
    // The analysis entry and the form block's LAB state one fact: one row, with the form's network.
    expect(body[1]).toEqual([
      'Laboratory (GN)',
      'Covered',
      '12.5%',
      '',
      '75.5',
      'AED',
      'Coinsurance: 10%; Copay cap: AED 500 per year',
    ]);
    expect(body.filter((r) => /^(LAB|Laboratory) \(GN\)$/.test(r[0] ?? ''))).toHaveLength(1);
    // Deductibles: a per-visit one with its currency; a 0 deductible says nothing and is left out.
    expect(body.find((r) => r[0] === 'PROCEDURE (GN)')?.[6]).toBe('Deductible (per visit): 25 AED');
    expect(body.find((r) => r[0] === 'PHYSIOTHERAPY (GN)')?.[6]).toBe(
      'Deductible (per visit): 10%; Deductible maximum: 500 AED',
    );
    expect(body.find((r) => r[0] === 'Pharmacy (GN)')?.[6]).toBe('Deductible (legacy form): Nil');
    // A maximum given as 0, "Nil" or not at all beside a percentage never reads as a 0.
    const other = blocks.get('Other benefits (no block named by the portal)') ?? [];
    expect(other.find((r) => r[0] === 'Radiology (X-Ray, CT, MRI)')).toEqual([
      'Radiology (X-Ray, CT, MRI)',
      'Covered',
      '30%',
      '',
      'none given by the portal',
      '',
      'Coinsurance: 5%; Prior approval needed above AED 1000; Conditions: MRI and CT need prior approval; Limits: annual limit AED 5000',
    ]);
    expect(other.find((r) => r[0] === 'Dental')).toEqual([
      'Dental',
      'Not covered',
      '',
      '',
      '',
      '',
      'Dental is excluded from this plan',
    ]);
    // The Maternity block's CONSULTATION is a consultation line (issue 35): gated like the others.
    expect(blocks.get('Maternity benefits')?.[1]).toEqual([
      'CONSULTATION (GN)',
      '',
      '10%',
      '',
      'none given by the portal',
      '',
      'A GP referral is required for specialist visits',
    ]);
    for (const ext of cer.extension ?? []) {
      const message = ext.extension?.find((e) => e.url === 'message')?.valueString;
      if (message) expect(text).toContain(`from the payer portal: "${message}"`);
    }
    // The order of the issue: summary, outcome, policy, tables, GP rule, warnings, checked.
    const order = [
      'What to collect',
      'Eligible',
      'Payer:',
      'Outpatient benefits',
      'Service category',
      'GP referral',
      'from the payer portal',
      'Checked:',
    ];
    // Each part after the previous one (the disposition near the top may repeat a sentence).
    let from = 0;
    for (const part of order) {
      const at = text.indexOf(part, from);
      expect(at, part).toBeGreaterThanOrEqual(from);
      from = at + part.length;
    }
  });

  it('eligible (sandbox): each fact once per block, no maximum 0, the summary of the categories asked', () => {
    const envelope = envelopeSchema.parse(
      JSON.parse(readFileSync(new URL('../fixtures/upstream/found-eligible.json', import.meta.url), 'utf8')),
    );
    const asked = ctx();
    asked.request.item = [
      {
        category: {
          coding: [{ system: 'http://terminology.hl7.org/CodeSystem/ex-benefitcategory', code: '3' }],
        },
      },
      {
        category: {
          coding: [{ system: `${CANONICAL_BASE}/CodeSystem/service-category`, code: 'physiotherapy' }],
        },
      },
      {
        category: {
          coding: [{ system: 'http://terminology.hl7.org/CodeSystem/ex-benefitcategory', code: '35' }],
        },
      },
    ];
    const cer = mapEnvelope(envelope, asked);
    expectNarrativeRules(cer);
    const summary = /<div>(.*?)<\/div>/.exec(cer.text?.div ?? '')?.[1];
    expect(summary).toBe(
      '<h2>What to collect</h2><ul>' +
        '<li>Consultation (Outpatient, GN+): 20% of the fee, at most AED 50 per visit; yearly cap on copays: AED 500 per year</li>' +
        '<li>Physiotherapy (Outpatient): AED 25 per visit</li>' +
        '<li>Dental: not covered</li></ul>',
    );
    const blocks = blocksOf(cer);
    for (const [title, [, ...rows]] of blocks) {
      const facts = rows.map((r) => r.slice(0, 6).join('|'));
      expect(new Set(facts).size, title).toBe(facts.length);
      // No maximum of 0 anywhere: "none given by the portal" beside a percentage instead.
      for (const row of rows) expect(row[4], `${title}: ${row[0]}`).not.toBe('0');
    }
    const outpatient = blocks.get('Outpatient benefits') ?? [];
    expect(outpatient.find((r) => r[0] === 'Physiotherapy (GN+)')?.slice(1, 6)).toEqual([
      'Covered',
      '',
      '25',
      '',
      'AED',
    ]);
    expect(outpatient.find((r) => r[0] === 'RADIOLOGY (GN+)')?.[4]).toBe('none given by the portal');
    expect(textOf(cer)).not.toContain('{"');
  });

  it('not eligible: says so with the payer reason', () => {
    const cer = map('found-not-eligible');
    expectNarrativeRules(cer);
    const text = textOf(cer).trim();
    expect(text.startsWith('Not eligible ')).toBe(true);
    expect(text).toContain('Policy lapsed on 2026-10-31; renewal not received');
    // Why, not a table of "Covered" nor a summary of what to collect.
    expect(cer.text?.div).not.toContain('<table>');
    expect(text).not.toContain('What to collect');
    expect(text).toContain(
      'The payer portal did not say whether a GP referral is required (is_gatekeeper = "Not Mentioned")',
    );
  });

  it('found without a determination: no determination, nothing assumed', () => {
    const cer = map('found-no-determination');
    expectNarrativeRules(cer);
    expect(textOf(cer).trim().startsWith('No determination ')).toBe(true);
  });

  it.each([
    'member-not-found',
    'invalid-credentials',
    'tpa-not-configured',
    'backoff',
    'error',
    'failed',
    'task-failed',
    'task-cancelled',
    'unknown-outcome',
  ])('%s: no determination and what to do next', (name) => {
    const cer = map(name);
    expect(cer.outcome).toBe('error');
    expectNarrativeRules(cer);
    const text = textOf(cer).trim();
    expect(text.startsWith('No determination ')).toBe(true);
    expect(text).toContain(cer.disposition ?? '');
  });

  it('queued, interim and still checking: since when', () => {
    for (const cer of [queuedCer(ctx()), map('in-flight'), stillCheckingCer(ctx(), fixture('in-flight'))]) {
      expect(cer.outcome).toBe('queued');
      expectNarrativeRules(cer);
      expect(textOf(cer).trim().startsWith('Still checking since 2026-11-22 10:00 UTC')).toBe(true);
      expect(textOf(cer)).not.toContain('Checked:');
    }
  });

  it('an adapter error (a guard): no determination with the adapter text', () => {
    const cer = adapterErrorCer(ctx(), { code: 'payer-guard-credentials', text: 'Reset the payer login' });
    expectNarrativeRules(cer);
    expect(textOf(cer)).toContain('No determination Reset the payer login');
  });

  it('multi-card: the statement with card, package and network', () => {
    const cer = map('multi-card');
    expectNarrativeRules(cer);
    expect(textOf(cer)).toMatch(
      /The member holds \d+ cards; this is card \d+ \(package .+, network .+\)\. Other cards are not shown\./,
    );
  });

  it('search-all: one section per payer that found the member, each with its policy', () => {
    const cer = map('search-all-two-eligible', true);
    expectNarrativeRules(cer);
    const text = textOf(cer);
    // One summary per eligible payer, then the outcome.
    expect(text.trim().startsWith('What to collect (')).toBe(true);
    expect(cer.text?.div.match(/<div>/g)).toHaveLength(2);
    expect(text).toContain(' Eligible at 2 payers ');
    expect(text.match(/Payer: /g)?.length).toBe(cer.insurance?.length);
    for (const name of [
      'search-all-complete',
      'search-all-none-found',
      'search-all-processing',
      'search-all-failed',
    ]) {
      expectNarrativeRules(map(name, true));
    }
  });

  it('documents: listed with their stable adapter links', () => {
    const cer = map('found-eligible-rich');
    const links = (cer.contained ?? []).flatMap((r) =>
      r.resourceType === 'DocumentReference' && /^(document-\d+|screenshot)$/.test(r.id ?? '')
        ? [(r as DocumentReference).content[0]?.attachment.url]
        : [],
    );
    expect(links.length).toBeGreaterThan(0);
    for (const url of links) expect(cer.text?.div).toContain(`href="${url}"`);
  });
});

describe('upstream text in the narrative', () => {
  it('escapes <, &, quotes and apostrophes, and stays valid FHIR', () => {
    const hostile = `<script>alert("x")</script> & 'quoted' <b onclick="y">`;
    const envelope = fixture('found-not-eligible');
    const data = envelope.eligibility_result?.data_dump?.data;
    if (!data?.policy_network) throw new Error('fixture changed');
    data.failure_reason = hostile;
    data.policy_network.payer_name = `Payer <&> "Q"`;
    data.policy_network.policy_plan_name = `Plan 'A' & <B>`;
    data.warning_messages = [{ message: `Card <expired> & "blocked"`, message_type: 'warning' }];
    const cer = mapEnvelope(envelope, ctx());
    expectNarrativeRules(cer);
    const div = cer.text?.div ?? '';
    expect(div).not.toContain('<script');
    expect(div).not.toMatch(/<[^>]*onclick/);
    expect(div).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;quoted&#39;');
    const text = textOf(cer);
    expect(text).toContain(hostile);
    expect(text).toContain(`Plan: Plan 'A' & <B>`);
    expect(text).toContain(`"Card <expired> & "blocked""`);
  });

  it('escapes the benefit notes and the currency as the portal gave it', () => {
    const envelope = fixture('found-eligible-rich');
    const analysis = envelope.eligibility_result?.data_dump?.data?.copay_analysis;
    const consultation = analysis?.copay_details?.[0];
    const laboratory = analysis?.copay_details?.[1];
    const radiology = analysis?.new_version_of_copay_analysis?.benefits?.[0];
    if (!consultation || !laboratory || !radiology) throw new Error('fixture changed');
    consultation.remarks = `Referral <GP> & "specialist" 'only'`;
    // Not an ISO 4217 code: the Money has no currency, the word stays in the description.
    consultation.copay_currency = `Dirham <"d"> & co`;
    delete consultation.cost_sharing;
    laboratory.copay_aggregate_cap = `AED 500 <per "year"> & 'more'`;
    radiology.conditions = `Waiting <6> months & "approval"`;
    radiology.limits = `AED 5,000 <per year> & 'cap'`;
    const cer = mapEnvelope(envelope, ctx());
    expectNarrativeRules(cer);
    const div = cer.text?.div ?? '';
    expect(div).toContain('Referral &lt;GP&gt; &amp; &quot;specialist&quot; &#39;only&#39;');
    expect(div).not.toMatch(/<(GP|per|6)[ >]/);
    const [, ...body] = blocksOf(cer).get('Outpatient benefits') ?? [];
    const item = cer.insurance?.[0]?.item?.[0];
    expect(item?.benefit?.find((b) => b.allowedMoney)?.allowedMoney?.currency).toBeUndefined();
    expect(body[0]).toEqual([
      'Consultation (In-Network)',
      'Covered',
      '20%',
      '50',
      '100 (per claim)',
      `Dirham <"d"> & co`,
      `Referral <GP> & "specialist" 'only'; Qualifiers: GP, Specialist; A GP referral is required for specialist visits`,
    ]);
    expect(body[1]?.[6]).toBe(`Coinsurance: 10%; Copay cap: AED 500 <per "year"> & 'more'`);
    const radiologyRow = body.find((r) => r[0] === 'Radiology (X-Ray, CT, MRI) (GN)');
    expect(radiologyRow?.[6]).toBe(
      `Prior approval needed above AED 1000; Conditions: Waiting <6> months & "approval"; Limits: AED 5,000 <per year> & 'cap'`,
    );
  });

  it('escapeXml leaves other text alone (Arabic included)', () => {
    expect(escapeXml('محمد & <علي>')).toBe('محمد &amp; &lt;علي&gt;');
  });
});

describe('stored CERs from before narratives', () => {
  it('withNarrative adds the same narrative the mapper builds, placed after id and meta', () => {
    const mapped = map('found-eligible-rich');
    const { text: _text, ...old } = mapped;
    const added = withNarrative({ ...old, meta: { versionId: '3' } });
    expect(Object.keys(added).slice(0, 4)).toEqual(['resourceType', 'id', 'meta', 'text']);
    expect(added.text).toEqual(narrativeOf(old));
    expect(added.text).toEqual(mapped.text);
    expectValidFhir(added);
  });
});
