import { readFileSync } from 'node:fs';
import { mapEnvelope } from './src/mapping/response/index.js';
import { visitSummary } from './src/mapping/response/visit-summary.js';
import { categoryByCode } from './src/mapping/response/vocabulary.js';
import { envelopeSchema } from './src/upstream/contract.js';
import { estimateClaimResponse, estimateItems } from './src/mapping/response/estimate.js';

const ctx: any = {
  checkId: 'c1', patient: { reference: 'Patient/p' }, insurer: { display: 'Daman' },
  request: { resourceType: 'CoverageEligibilityRequest', status: 'active', purpose: ['benefits'], patient: { reference: 'Patient/p' }, created: '2026-11-22', insurer: { display: 'Daman' } },
  isSearchAll: false, baseUrl: 'http://x', now: '2026-11-22T10:00:00Z',
};
for (const name of process.argv.slice(2)) {
  const env = envelopeSchema.parse(JSON.parse(readFileSync(`test/fixtures/mapping/${name}.json`, 'utf8')));
  const cer = mapEnvelope(env, ctx).cer ?? (mapEnvelope(env, ctx) as any);
  const c: any = (cer as any).resourceType ? cer : (cer as any).cer;
  const asked = ['consultation','lab','diagnostics','maternity','inpatient','radiology'].map((code) => ({ coding: [{ system: 'http://fhir-eligibility-adapter.org/fhir/CodeSystem/service-category', code }] }));
  for (const s of visitSummary(c, asked)) for (const l of s.lines) { console.log('  ', l.sentence); for (const n of l.notes) console.log('      -', n); }
  const div = c.text.div as string;
  console.log(div.replace(/<tr>/g, '\n<tr>').replace(/<h3>/g, '\n<h3>').split('\n').filter((l: string) => /<h3>|<tr><td>/.test(l)).map((l: string) => l.replace(/<\/td><td>/g, ' | ').replace(/<[^>]+>/g, ' ')).join('\n'));
  const items = estimateItems(c.insurance[0].item, [{ category: categoryByCode('lab')!, fee: 90 }, { category: categoryByCode('consultation')!, fee: 400 }, { category: categoryByCode('maternity')!, fee: 300 }]);
  const cr = estimateClaimResponse(c, items, '2026-11-22T10:00:00Z');
  console.log(JSON.stringify(cr.item?.map((i) => i.adjudication?.map((a) => `${a.category.coding?.[0]?.code}=${a.amount?.value}`)), null, 0), JSON.stringify(cr.total?.map((a) => `${a.category.coding?.[0]?.code}=${a.amount.value}`)));
}
