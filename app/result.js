/**
 * The result of one check as the desk reads it (docs/front-desk.md), top to bottom: one headline
 * with the outcome and the next step; the visit summary (what the patient pays) and the fee
 * estimate; the ids the claim needs; the benefits table for a member whose coverage is in force;
 * the portal's messages, once; the documents (letters and forms only for a found member, the
 * portal screenshot always); when it was checked. Written from the structured CER; the visit
 * summary and the table come from its narrative (narrative.js), so the page and an EHR read the
 * same sentences and figures.
 */
import { call, outcomeText } from './api.js';
import { when } from './clock.js';
import { $, bdi, clean, el } from './dom.js';
import { benefitTables, visitSummaries } from './narrative.js';

const byName = (list, name) => (list ?? []).filter((e) => e.url?.endsWith(`/${name}`));

/** The value of a complex extension's part (string, code, integer, boolean, date). */
function part(extension, url) {
  const found = extension?.extension?.find((e) => e.url === url);
  if (!found) return undefined;
  for (const key of ['valueString', 'valueCode', 'valuePositiveInt', 'valueUnsignedInt', 'valueDate']) {
    if (found[key] !== undefined) return String(found[key]);
  }
  return found.valueBoolean;
}

function contained(cer, reference) {
  return reference?.startsWith('#') ? (cer.contained ?? []).find((r) => `#${r.id}` === reference) : undefined;
}

const payerOf = (cer, coverage) =>
  coverage?.payor?.[0]?.display ?? cer.insurer?.display ?? cer.insurer?.identifier?.value ?? 'the payer';

/** Sentences the disposition adds after its reason, each shown elsewhere on the page. */
const SHOWN_ELSEWHERE =
  /\s*(Payer portal (warning|information):|A GP referral|No GP referral|The member holds )/;

/** The payer's reason in a disposition, without the messages and rules the page lists itself. */
function reasonOf(cer) {
  const text = cer.disposition ?? cer.error?.[0]?.code?.text ?? '';
  const cut = text.search(SHOWN_ELSEWHERE);
  return (cut >= 0 ? text.slice(0, cut) : text).trim();
}

/** What the headline says and what the desk does next, by outcome. */
function verdict(cer) {
  const insurance = cer.insurance ?? [];
  const inForce = insurance.filter((i) => i.inforce === true);
  const coverage = contained(cer, insurance[0]?.coverage?.reference);
  const payer = payerOf(cer, coverage);
  if (cer.outcome === 'queued')
    return { tone: 'wait', short: 'Still checking', title: `Still checking since ${when(cer.created)}` };
  if (cer.outcome !== 'error' && inForce.length > 1) {
    return {
      tone: 'ok',
      short: `Eligible at ${inForce.length} payers`,
      title: `Eligible at ${inForce.length} payers`,
      next: 'Choose the payer to bill below; the visit summary of each is shown with it.',
    };
  }
  if (cer.outcome !== 'error' && inForce.length === 1) {
    const card = byName(inForce[0].extension, 'multi-card')[0];
    const onCard = card
      ? ` on card ${part(card, 'cardIndex') ?? '?'} of ${part(card, 'cardTotal') ?? 'several'}`
      : '';
    return {
      tone: 'ok',
      short: `Eligible${onCard}`,
      title: `Eligible at ${payer}${onCard}`,
      next: 'Next: tell the patient the share below; enter the fee to get the amount to collect.',
    };
  }
  if (insurance.some((i) => i.inforce === false)) {
    return {
      tone: 'bad',
      short: 'Not eligible',
      title: `Not eligible at ${payer}`,
      why: reasonOf(cer),
      next: 'Next: do not bill this payer for the visit. Ask for another insurance card, check another payer, or treat the visit as self-pay.',
    };
  }
  const code = cer.error?.[0]?.code?.coding?.[0]?.code;
  if (code === 'member-not-found') {
    return {
      tone: 'bad',
      short: 'Member not found',
      title: `Member not found at ${payer}`,
      why: 'The payer portal has no member with this identifier.',
      next: 'Next: check again with the insurance card number (an Emirates ID is not always linked at the payer), check the digits, or try another payer.',
      retryWithCard: true,
    };
  }
  return { tone: 'bad', short: 'No determination', title: 'No determination', why: reasonOf(cer) };
}

/** The outcome in words, as the headline says it (`Eligible at Daman`, `Member not found at AXA`). */
export const outcomeWords = (cer) => verdict(cer).title;

/** The outcome in a word or two for a list that names the payer beside it, with its tone. */
export function outcomeBadge(cer) {
  const { short, tone } = verdict(cer);
  return { words: short, tone };
}

function headline(cer, onSearchAll) {
  const v = verdict(cer);
  const nodes = [el('p', { id: 'headline', class: `headline ${v.tone}`, text: v.title })];
  if (v.why) nodes.push(el('p', { class: 'why', dir: 'auto', text: clean(v.why) }));
  if (v.next) nodes.push(el('p', { class: 'next', text: v.next }));
  if (v.retryWithCard) {
    nodes.push(
      el(
        'button',
        {
          type: 'button',
          onclick: () => {
            const field = $('patient-id');
            field.value = '';
            field.placeholder = 'Insurance card number';
            field.focus();
            field.scrollIntoView({ block: 'center' });
          },
        },
        'Try the card number',
      ),
    );
    // Another payer may hold the member: one click runs the same patient across all of them.
    if (onSearchAll && !(cer.purpose ?? []).includes('discovery'))
      nodes.push(el('button', { type: 'button', onclick: onSearchAll }, 'Search all payers'));
  }
  return nodes;
}

// ---------------------------------------------------------------- per coverage

function facts(rows) {
  const shown = rows.filter(([, value]) => value !== undefined && value !== null && value !== '');
  if (shown.length === 0) return null;
  return el(
    'dl',
    { class: 'facts' },
    ...shown.flatMap(([name, value]) => [
      el('dt', { text: name }),
      el('dd', {}, typeof value === 'string' ? bdi(value) : value),
    ]),
  );
}

const classValue = (coverage, code) =>
  coverage?.class?.find((c) => c.type?.coding?.some((k) => k.code === code))?.value;

function periodOf(coverage) {
  const p = coverage?.period;
  return p?.start || p?.end ? `${p.start ?? 'not stated'} to ${p.end ?? 'not stated'}` : undefined;
}

/** The ids the claim needs: member id and the portal's eligibility id (or that it gave none). */
function claimIds(coverage) {
  const details = byName(coverage?.extension, 'policy-details')[0];
  const member =
    coverage?.subscriberId ??
    coverage?.identifier?.find((i) => i.type?.coding?.some((c) => c.code === 'MB'))?.value;
  return el(
    'div',
    { class: 'claim-ids' },
    el('h3', { text: 'For the claim' }),
    facts([
      ['Member id', member ?? 'not given by the portal'],
      ['Eligibility id', part(details, 'eligibilityId') ?? 'not given by the portal'],
    ]),
  );
}

function multiCard(insurance) {
  const card = byName(insurance.extension, 'multi-card')[0];
  if (!card) return null;
  const total = Number(part(card, 'cardTotal'));
  const others = Number.isInteger(total) && total > 1 ? `The other ${total - 1}` : 'The other cards';
  const number = part(card, 'cardNumber');
  return el(
    'p',
    { class: 'cards' },
    `Card ${part(card, 'cardIndex') ?? '?'} of ${part(card, 'cardTotal') ?? 'several'} shown`,
    ...(number ? [' (', bdi(number), ')'] : []),
    `: package ${clean(part(card, 'package') ?? 'not stated')}, network ${clean(part(card, 'network') ?? 'not stated')}. `,
    `${others} are not shown: to check one, run a new check with its card number.`,
  );
}

function gpRule(insurance) {
  const rule = byName(insurance.extension, 'gp-referral-required')[0];
  const required = rule ? part(rule, 'required') : undefined;
  if (required === true) return el('p', { text: 'A GP referral is required for specialist visits.' });
  if (required === false) return el('p', { text: 'No GP referral is required for specialist visits.' });
  return null;
}

function coverageSection(cer, insurance, tables) {
  const coverage = contained(cer, insurance.coverage?.reference);
  const payer = payerOf(cer, coverage);
  const section = el(
    'div',
    { class: 'coverage' },
    el('h3', {}, 'Payer: ', bdi(payer)),
    claimIds(coverage),
    facts([
      ['Plan', classValue(coverage, 'plan')],
      ['Package', classValue(coverage, 'subplan')],
      ['Network', coverage?.network],
      ['Policy period', periodOf(coverage)],
    ]) ?? '',
  );
  for (const extra of [multiCard(insurance), gpRule(insurance)]) if (extra) section.append(extra);
  // The table only for coverage in force: a lapsed policy's `Covered` rows would mislead.
  if (insurance.inforce === true && tables.length > 0) {
    section.append(el('h3', { text: 'Benefits' }), ...tables);
  }
  return section;
}

// ---------------------------------------------------------------- messages and documents

/** Every portal message once (the CER's and each coverage's), with its type. */
function messages(cer) {
  const all = [
    ...byName(cer.extension, 'portal-message'),
    ...(cer.insurance ?? []).flatMap((i) => byName(i.extension, 'portal-message')),
  ];
  const seen = new Set();
  const items = [];
  for (const message of all) {
    const text = part(message, 'message');
    if (!text || seen.has(text)) continue;
    seen.add(text);
    const type = part(message, 'type') === 'information' ? 'Information' : 'Warning';
    items.push(el('li', { dir: 'auto' }, `${type}: `, bdi(text)));
  }
  return items.length ? [el('h3', { text: 'From the payer portal' }), el('ul', {}, ...items)] : [];
}

/** `2026-12-07 01:50 UTC` in a server's sentence as the clinic reads times (clock.js). */
const clinicTimes = (text) =>
  text.replace(/(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}) UTC/g, (_all, day, time) => when(`${day}T${time}:00Z`));

/**
 * The documents to open: the portal screenshot always (the proof of what the portal said), the
 * letters and forms only for a found member (a member-not-found answer has none to give). Beside a
 * kept one, until when it is kept (`kept`: Binary id -> ISO date, docs/evidence.md); a document
 * not kept yet says so with its next try, one that could not be kept says why, each with nothing
 * to open.
 */
function documents(cer, onOpen, kept) {
  const found = (cer.insurance ?? []).length > 0;
  const refs = [
    ...byName(cer.extension, 'portal-screenshot'),
    ...(found ? byName(cer.extension, 'portal-document') : []),
  ];
  const items = refs.flatMap((ext) => {
    const doc = contained(cer, ext.valueReference?.reference);
    const attachment = doc?.content?.[0]?.attachment;
    const title = attachment?.title ?? doc?.description ?? 'Document';
    // Not kept yet: a download failed and is tried again; nothing to open, the next try in clinic time.
    if (doc?.description?.startsWith('Not kept yet:')) {
      return [el('li', { class: 'not-kept' }, bdi(title), `: ${clinicTimes(doc.description)}`)];
    }
    if (!attachment?.url) {
      return doc?.description
        ? [
            el(
              'li',
              { class: 'not-kept' },
              bdi(attachment?.title ?? doc.type?.text ?? 'Document'),
              `: ${doc.description}`,
            ),
          ]
        : [];
    }
    const until = kept.get(attachment.url.split('/').pop() ?? '');
    return [
      el(
        'li',
        {},
        el('button', { type: 'button', onclick: () => onOpen(attachment.url, title) }, 'Open ', bdi(title)),
        ...(until ? [' ', el('span', { class: 'kept', text: `kept until ${until}` })] : []),
      ),
    ];
  });
  return items.length ? [el('h3', { text: 'Documents' }), el('ul', { class: 'documents' }, ...items)] : [];
}

/**
 * The documents of a shown answer again, with when each kept one is kept until: its
 * DocumentReference's date (when kept) plus `keptDays` (EVIDENCE_RETENTION_DAYS). True while a
 * document the answer links is not kept yet.
 */
export async function showKept(cer, { onOpen, keptDays }) {
  const found = await call(
    `/fhir/DocumentReference?related=${encodeURIComponent(`CoverageEligibilityResponse/${cer.id}`)}&_count=100`,
  );
  if (found.status !== 200) return false;
  const kept = new Map();
  for (const entry of found.json.entry ?? []) {
    const doc = entry.resource;
    const at = Date.parse(doc?.date ?? '');
    if (!doc?.id || Number.isNaN(at)) continue;
    kept.set(doc.id, new Date(at + keptDays * 86_400_000).toISOString().slice(0, 10));
  }
  $('documents').replaceChildren(...documents(cer, onOpen, kept));
  // Whether a linked document is not kept yet (the caller may ask again shortly).
  return (cer.contained ?? []).some((r) => {
    const url = r.resourceType === 'DocumentReference' ? r.content?.[0]?.attachment?.url : undefined;
    return url !== undefined && !kept.has(url.split('/').pop() ?? '');
  });
}

// ---------------------------------------------------------------- the estimate

/** The found member's coverage in force: an estimate can be asked for. */
const canEstimate = (cer) =>
  cer.outcome !== 'error' &&
  cer.outcome !== 'queued' &&
  (cer.insurance ?? []).some((i) => i.inforce === true);

const money = (value) => Number(value).toFixed(2);

/**
 * What a ClaimResponse of $estimate says to the desk: the copay total (what the patient pays),
 * the sentence of each item (its first processNote: the visit summary's sentence), the notes of
 * the whole answer (which items the totals leave out), and the other notes (every assumption
 * behind the figure).
 */
function shareOf(claimResponse) {
  const isCopay = (t) => t.category?.coding?.some((c) => c.code === 'copay');
  const total = (claimResponse.total ?? []).find(isCopay)?.amount;
  const notes = new Map((claimResponse.processNote ?? []).map((n) => [n.number, n.text]));
  const items = claimResponse.item ?? [];
  const firsts = items.map((item) => item.noteNumber?.[0]);
  const ofItems = new Set(items.flatMap((item) => item.noteNumber ?? []));
  const sentences = firsts.map((n) => notes.get(n)).filter(Boolean);
  const assumptions = [...notes]
    .filter(([n]) => ofItems.has(n) && !firsts.includes(n))
    .map(([, text]) => text);
  const whole = [...notes].filter(([n]) => !ofItems.has(n)).map(([, text]) => text);
  const uncounted = items.filter((item) => !(item.adjudication ?? []).some(isCopay)).length;
  return { total, sentences, assumptions, whole, partial: uncounted > 0 && uncounted < items.length };
}

/** Asks $estimate for the fee and shows `Collect AED <amount>` with the sentences behind it. */
export async function estimate(cerId, fee, category) {
  const share = $('share');
  share.hidden = false;
  share.replaceChildren(el('p', { text: 'Estimating…' }));
  const answer = await call(`/fhir/CoverageEligibilityResponse/${encodeURIComponent(cerId)}/$estimate`, {
    method: 'POST',
    body: {
      resourceType: 'Parameters',
      parameter: [
        {
          name: 'item',
          part: [
            { name: 'category', valueCoding: category },
            { name: 'fee', valueMoney: { value: fee, currency: 'AED' } },
          ],
        },
      ],
    },
  });
  if (answer.status !== 200 || answer.json?.resourceType !== 'ClaimResponse') {
    share.replaceChildren(el('p', { class: 'error', text: outcomeText(answer.json, answer.status) }));
    return answer.status;
  }
  const { total, sentences, assumptions, whole, partial } = shareOf(answer.json);
  share.replaceChildren(
    el(
      'p',
      { class: 'collect' },
      total?.value === undefined
        ? 'No amount to collect can be estimated: the portal gave no figure for this visit'
        : partial
          ? `Collect AED ${money(total.value)}, for the items with figures only`
          : `Collect AED ${money(total.value)}`,
    ),
    el('p', { class: 'source' }, `Fee AED ${money(fee)}. `, bdi(sentences.join('; '))),
    // The answer's own notes on its totals (the items they leave out), as the ClaimResponse says them.
    ...whole.map((text) => el('p', { class: 'totals', dir: 'auto', text: clean(text) })),
    ...(assumptions.length
      ? [
          el(
            'details',
            {},
            el('summary', { text: 'How this was estimated' }),
            el('ul', {}, ...assumptions.map((text) => el('li', { dir: 'auto', text: clean(text) }))),
          ),
        ]
      : []),
    el('p', { class: 'hint', dir: 'auto', text: clean(answer.json.disposition ?? '') }),
  );
  return answer.status;
}

// ---------------------------------------------------------------- the whole result

/** Fills the result section with one CER; `onOpen(url, title)` opens a document with the key. */
export function renderResult(cer, { onOpen, onSearchAll }) {
  const found = canEstimate(cer);
  $('outcome').replaceChildren(...headline(cer, onSearchAll));
  $('summary').replaceChildren(...(found ? visitSummaries(cer.text?.div) : []));
  $('estimate-form').hidden = !found;
  $('share').hidden = true;
  $('share').replaceChildren();
  $('fee').value = '';
  const insurance = cer.insurance ?? [];
  const tables = benefitTables(cer.text?.div);
  $('coverages').replaceChildren(...insurance.map((ins, i) => coverageSection(cer, ins, tables[i] ?? [])));
  $('messages').replaceChildren(...messages(cer));
  $('documents').replaceChildren(...documents(cer, onOpen, new Map()));
  $('checked').textContent = cer.outcome === 'queued' ? '' : `Checked: ${when(cer.created)}`;
}
