/**
 * The front-desk page: sign in with the tenant's key, run a check and follow it to its answer,
 * recent checks, and the operator view. Plain ES modules on this service's own FHIR API and
 * /app/api/ (docs/front-desk.md); nothing is loaded from anywhere else.
 */
import { call, endSession, fetchRaw, outcomeText, pathOf, readSession, session } from './api.js';
import { loadAppointments, startAppointments } from './appointments.js';
import { setTimeZone, when } from './clock.js';
import { showEhrSchedule, startEhrSchedule } from './ehr-schedule.js';
import { $, bdi, el } from './dom.js';
import { emiratesIdProblem, PROBLEM_TEXT } from './emirates-id.js';
import { loadLaunchContext, servicedOf, showLaunch } from './launch.js';
import { estimate, outcomeBadge, outcomeWords, renderResult, showKept } from './result.js';

const V2_0203 = 'http://terminology.hl7.org/CodeSystem/v2-0203';
const REQUEST_SYSTEM = 'urn:fhir-eligibility-adapter:front-desk';
const EMIRATES_ID = /^784-?\d{4}-?\d{7}-?\d$/;
const POLL_MS = 1000;
/** The payer code of a search across all payers (purpose discovery), as the upstream names it. */
const ALL_PAYERS = 'ALL';
const BENEFIT_CATEGORY = 'http://terminology.hl7.org/CodeSystem/ex-benefitcategory';
/** The category $estimate is asked about, by the visit type's `system|code` (from /app/api/visit-types). */
const categoryOfVisitType = new Map();
/** Known payer names by code (from /app/api/payers). */
const payerNames = new Map();

/** A new request identifier (crypto.randomUUID needs a secure context; this does not). */
function newIdentifier() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

// ---------------------------------------------------------------- sign in and tabs

async function signIn(key) {
  const payers = await call('/app/api/payers', { key });
  if (payers.status === 401) {
    return payers.json?.issue?.[0]?.details?.text?.includes('clinic account')
      ? 'This clinic signs people in with their clinic account: use the button below.'
      : 'This API key is not valid.';
  }
  if (payers.status !== 200) return outcomeText(payers.json, payers.status);
  session.key = key;
  const error = await enter(payers, key);
  if (error) session.key = null;
  return error;
}

/** Opens the workspace once signed in (key or session): the form's lists, the clinic's zone. */
async function enter(payers, key) {
  const visitTypes = await call('/app/api/visit-types', { key });
  if (visitTypes.status !== 200) return outcomeText(visitTypes.json, visitTypes.status);
  const settings = await call('/app/api/settings', { key });
  if (settings.status !== 200) return outcomeText(settings.json, settings.status);
  setTimeZone(settings.json.timeZone);
  keptDays = settings.json.evidenceRetentionDays ?? 730;
  fillPayers(payers.json);
  for (const v of visitTypes.json.visitTypes) categoryOfVisitType.set(`${v.system}|${v.code}`, v.category);
  fillSelect(
    $('visit-type'),
    visitTypes.json.visitTypes.map((v) => ({ value: `${v.system}|${v.code}`, label: v.display })),
  );
  $('sign-in').hidden = true;
  $('workspace').hidden = false;
  $('sign-out').hidden = false;
  // A person without an operator role is not offered the operator view (the API refuses it too).
  $('tab-operator').hidden = Boolean(session.person && !session.person.operator);
  if (session.person) {
    $('signed-in-as').hidden = false;
    $('signed-in-as').textContent = `Signed in as ${session.person.name}`;
  }
  selectTab('desk');
  $('patient-id').focus();
  void loadRecent();
  void loadAppointments(openAnswer);
  openLinkedAnswer();
  if (session.person) void openLaunch();
  return null;
}

/** A session the EHR opened (SMART App Launch): its patient fills the form (docs/smart-launch.md). */
async function openLaunch() {
  const context = await loadLaunchContext();
  if (!context) return;
  showLaunch(context, {
    check: (fresh) => submitForm({ fresh }),
    open: openAnswer,
    payerShown: showPayerName,
  });
  // The EHR's identifier is held to the same guard as a typed one: said under the field at once.
  if (context.patient.identifier) checkPatientId();
}

/** Shows a stored answer (an appointment's latest) in the result section. */
function openAnswer(path) {
  stopPolling();
  void follow(path);
}

/**
 * A link from a CDS Hooks card (`/app/#answer=<CER id>`, docs/cds-hooks.md) opens that answer once
 * signed in; the id is only ever used as a path segment of this service's own FHIR API. `.` and
 * `..` are not ids: the browser resolves them as dot segments (a search, or /fhir/ itself).
 */
function openLinkedAnswer() {
  const match = /^#answer=(?!\.\.?$)([A-Za-z0-9\-.]{1,64})$/.exec(window.location.hash);
  if (!match) return;
  window.history.replaceState(null, '', window.location.pathname);
  stopPolling();
  void follow(`/fhir/CoverageEligibilityResponse/${match[1]}`, null);
}

function fillSelect(select, options) {
  select.replaceChildren(...options.map((o) => el('option', { value: o.value }, o.label)));
}

/**
 * The payer field takes any payer code (the service passes every code through); it suggests the
 * clinic's recent payers first, then the known ones, then a search across all payers.
 */
function fillPayers({ payers, recent }) {
  payerNames.clear();
  for (const p of payers) payerNames.set(p.code, p.display);
  const option = (code, label) => el('option', { value: code }, label);
  const known = payers.filter((p) => !recent.includes(p.code));
  $('payer-list').replaceChildren(
    ...recent.map((code) => option(code, `Recent: ${payerNames.get(code) ?? code}`)),
    ...known.map((p) => option(p.code, p.display)),
    // A search across every payer the upstream knows (purpose discovery): one answer per payer found.
    option(ALL_PAYERS, 'All payers (search)'),
  );
  $('payer').value = recent[0] ?? payers[0]?.code ?? '';
  showPayerName();
}

const payerCodeOf = (value) => value.trim().toUpperCase();

function showPayerName() {
  const code = payerCodeOf($('payer').value);
  $('payer-name').textContent =
    code === ALL_PAYERS
      ? 'All payers (search): one answer per payer that finds the member.'
      : (payerNames.get(code) ??
        (code ? 'A payer code the list does not name: it is sent as typed.' : 'Type a payer code.'));
}

/**
 * Back to the sign-in: the key forgotten; a person's session that the service no longer knows
 * (ended, timed out) is only left, the Sign out button ends a live one (endSession).
 */
function signOut() {
  if (session.person) {
    session.person = null;
    $('sign-in-error').textContent = 'Your session has ended: sign in again.';
  }
  $('signed-in-as').hidden = true;
  $('launch').hidden = true;
  $('visit-date-field').hidden = true;
  session.key = null;
  stopPolling();
  $('workspace').hidden = true;
  $('sign-out').hidden = true;
  $('sign-in').hidden = false;
  $('result').hidden = true;
  progress('');
  $('api-key').value = '';
  $('api-key').focus();
}

function selectTab(name) {
  for (const [tab, panel] of [
    ['tab-desk', 'desk'],
    ['tab-operator', 'operator'],
  ]) {
    const selected = panel === name;
    $(tab).setAttribute('aria-selected', String(selected));
    $(tab).tabIndex = selected ? 0 : -1;
    $(panel).hidden = !selected;
  }
  if (name === 'operator') void loadOperator();
}

function tabKeys(event) {
  if (event.key !== 'ArrowLeft' && event.key !== 'ArrowRight') return;
  const next = event.currentTarget.id === 'tab-desk' ? 'operator' : 'desk';
  selectTab(next);
  $(`tab-${next === 'desk' ? 'desk' : 'operator'}`).focus();
}

// ---------------------------------------------------------------- a check

let polling = null;
/** When the check followed was sent, or first seen waiting (its progress counts from then). */
let sentAt = 0;
let lastCheck = null;
/** EVIDENCE_RETENTION_DAYS, from the settings: how long a kept document stays. */
let keptDays = 730;
let shownId = null;

function stopPolling() {
  if (polling) clearTimeout(polling.timer);
  polling = null;
  sentAt = 0;
}

function requestBody({ patientId, patientName, payerCode, payerName, visitType, visitDay }) {
  const [system, code] = visitType.split('|');
  const isEmiratesId = EMIRATES_ID.test(patientId);
  const searchAll = payerCode === ALL_PAYERS;
  const patient = {
    resourceType: 'Patient',
    id: 'patient',
    identifier: [
      { type: { coding: [{ system: V2_0203, code: isEmiratesId ? 'NI' : 'MB' }] }, value: patientId },
    ],
    ...(patientName ? { name: [{ text: patientName }] } : {}),
  };
  const payer = {
    resourceType: 'Organization',
    id: 'payer',
    identifier: [{ type: { coding: [{ system: V2_0203, code: 'NIIP' }] }, value: payerCode }],
    name: payerName,
  };
  return {
    resourceType: 'CoverageEligibilityRequest',
    identifier: [{ system: REQUEST_SYSTEM, value: newIdentifier() }],
    status: 'active',
    // discovery: a search across all payers, whose insurer is a display-only reference.
    purpose: searchAll ? ['discovery'] : ['benefits', 'validation'],
    created: new Date().toISOString().slice(0, 10),
    // The visit (a future one is an appointment, re-checked before it: docs/previsit.md).
    ...servicedOf(visitDay),
    patient: { reference: '#patient' },
    insurer: searchAll ? { display: 'All payers' } : { reference: '#payer' },
    item: [{ category: { coding: [{ system, code }] } }],
    contained: searchAll ? [patient] : [patient, payer],
  };
}

/** The running check's elapsed-seconds timer (progress while it waits). */
let ticking = null;

/**
 * The status line (role="status"). `since` (epoch ms): a check is waiting for its answer since
 * then; the text says so and a seconds counter beside it moves every second (hidden from screen
 * readers, which hear the text once), from the moment the check is sent until its answer.
 */
function progress(text, since) {
  if (ticking) clearTimeout(ticking);
  ticking = null;
  const status = $('progress');
  if (since === undefined) {
    status.textContent = text;
    return;
  }
  const seconds = el('span', { class: 'elapsed', 'aria-hidden': 'true' });
  const tick = () => {
    seconds.textContent = ` (${Math.max(0, Math.round((Date.now() - since) / 1000))} s)`;
    ticking = setTimeout(tick, 1000);
  };
  status.replaceChildren(el('span', { class: 'spinner', 'aria-hidden': 'true' }), text, seconds);
  tick();
}

/** Sends the form's check; `fresh`: a new portal session (Check again). */
function submitForm({ fresh = false } = {}) {
  // A value filled in without typing (a link, the EHR) is held to the same guard.
  checkPatientId();
  if (!$('patient-id').reportValidity()) return;
  void runCheck(formCheck(), { fresh });
}

/** The check the form describes. */
function formCheck() {
  const payerCode = payerCodeOf($('payer').value);
  return {
    patientId: $('patient-id').value.trim(),
    patientName: $('patient-name').value.trim(),
    payerCode,
    payerName: payerNames.get(payerCode) ?? payerCode,
    visitType: $('visit-type').value,
    visitDay: $('visit-date-field').hidden ? '' : $('visit-date').value,
  };
}

/** Runs a check: $submit, then the CER read with If-None-Match until it is no longer queued. */
async function runCheck(check, { fresh = false } = {}) {
  stopPolling();
  $('result').hidden = true;
  sentAt = Date.now();
  progress(`Checking eligibility at ${check.payerName}: sent to the payer portal…`, sentAt);
  const answer = await call('/fhir/CoverageEligibilityRequest/$submit', {
    method: 'POST',
    body: requestBody(check),
    // Check again: a new portal session, never a reused recent answer.
    headers: { Prefer: 'wait=1', ...(fresh ? { 'Cache-Control': 'no-cache' } : {}) },
  });
  if (answer.status === 401) return signOut();
  const location = answer.headers.get('location');
  if (!location) {
    progress(`The check was not sent: ${outcomeText(answer.json, answer.status)}`);
    return;
  }
  const path = pathOf(location);
  lastCheck = { ...check, id: decodeURIComponent(path.split('/').pop() ?? '') };
  if (answer.json?.resourceType === 'CoverageEligibilityResponse') {
    show(answer.json, answer.headers.get('etag'), path);
  } else {
    await follow(path, null);
  }
}

/** A waiting check's disposition begins so; its wait follows ("2 checks ahead, about 1 min"). */
const WAITING = 'Waiting to be sent to the payer portal: ';

/** The wait of a check not yet sent (the checks of the clinic ahead of it), or null. */
function waitOf(cer) {
  const disposition = cer.disposition ?? '';
  return disposition.startsWith(WAITING) ? disposition.slice(WAITING.length).replace(/\.$/, '') : null;
}

function show(cer, etag, path) {
  if (cer.outcome === 'queued') {
    sentAt ||= Date.now();
    const wait = waitOf(cer);
    progress(
      wait
        ? `Waiting for a free payer-portal slot: ${wait}. This page updates by itself.`
        : `${outcomeWords(cer)}. This page updates by itself.`,
      sentAt,
    );
    polling = { path, etag, timer: setTimeout(() => void follow(path, etag), POLL_MS) };
    return;
  }
  // Said once on screen (the result's headline); a screen reader hears it here too.
  progress('');
  $('progress').replaceChildren(
    'Done: the answer is below.',
    el('span', { class: 'visually-hidden', text: ` ${outcomeWords(cer)}.` }),
  );
  showResult(cer, lastCheck?.id === cer.id ? lastCheck.visitType : undefined);
  // The answer is what the desk reads next: brought into view, the focus left where it was.
  $('result').scrollIntoView({ block: 'start' });
  void loadRecent();
}

async function follow(path, etag) {
  const read = await call(path, { headers: etag ? { 'If-None-Match': etag } : {} });
  if (read.status === 401) return signOut();
  if (read.status === 304) {
    polling = { path, etag, timer: setTimeout(() => void follow(path, etag), POLL_MS) };
    return;
  }
  if (read.status !== 200) {
    progress(`The answer could not be read: ${outcomeText(read.json, read.status)}`);
    return;
  }
  show(read.json, read.headers.get('etag'), path);
}

async function keepShowingKept(cer, onOpen, tries) {
  if (shownId !== cer.id) return;
  const pending = await showKept(cer, { onOpen, keptDays });
  if (!pending || tries <= 1) return;
  setTimeout(async () => {
    // Still not kept a few seconds on: the answer again, which says a document whose download
    // failed is not kept yet, and when it is tried again (docs/evidence.md).
    const fresh =
      tries <= 3 ? await call(`/fhir/CoverageEligibilityResponse/${encodeURIComponent(cer.id)}`) : null;
    void keepShowingKept(fresh?.status === 200 ? fresh.json : cer, onOpen, tries - 1);
  }, 1500);
}

/** The category $estimate is asked about for the shown check: its visit type's, else Consultation. */
let shownCategory = null;

/** `visitType` is the check's `system|code` (its request's item category), when known. */
function showResult(cer, visitType) {
  shownId = cer.id;
  const [system, code] = (visitType ?? '').split('|');
  shownCategory =
    categoryOfVisitType.get(visitType) ??
    (system === BENEFIT_CATEGORY ? { system, code } : { system: BENEFIT_CATEGORY, code: '3' });
  const onOpen = (url, title) => void openDocument(url, title);
  renderResult(cer, { onOpen, onSearchAll: () => void searchAllPayers() });
  $('result').hidden = false;
  // The proof: which documents are kept, and until when (docs/evidence.md). They are kept just
  // after the answer: asked again a few times while this answer is shown and some are not yet.
  if (cer.outcome !== 'queued') void keepShowingKept(cer, onOpen, 5);
}

/** A fee as the desk types it (`150`, `150.50`, `1,200`): AED with at most two decimals, or null. */
function feeOf(text) {
  const plain = text.replace(/[\s,]/g, '');
  return /^\d{1,7}(\.\d{1,2})?$/.test(plain) ? Number(plain) : null;
}

async function askEstimate() {
  const fee = feeOf($('fee').value);
  if (fee === null) {
    $('share').hidden = false;
    $('share').replaceChildren(
      el('p', { class: 'error', text: 'Enter the fee in AED, for example 150 or 150.50.' }),
    );
    $('fee').focus();
    return;
  }
  if (!shownId || !shownCategory) return;
  const status = await estimate(shownId, fee, shownCategory);
  if (status === 401) signOut();
}

async function openDocument(url, title) {
  if (!url) return;
  const response = await fetchRaw(pathOf(url));
  if (!response.ok) {
    progress('The document could not be fetched from the payer portal now.');
    return;
  }
  // Saved from a local blob: URL, so the key never leaves this page in a link.
  const blobUrl = URL.createObjectURL(await response.blob());
  const link = el('a', { href: blobUrl, download: title });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(blobUrl), 60_000);
}

/** Check again: the same patient, payer and visit type as the check shown, as a new check. */
async function checkAgain() {
  const check = await shownCheck();
  if (check) await runCheck(check, { fresh: true });
}

/** A member not found at one payer: the same patient and visit type, searched across all payers. */
async function searchAllPayers() {
  const check = await shownCheck();
  if (check) await runCheck({ ...check, payerCode: ALL_PAYERS, payerName: 'All payers' }, { fresh: true });
}

/** The patient, payer and visit type of the check shown: the one just run, else read from its request. */
async function shownCheck() {
  if (lastCheck && lastCheck.id === shownId) return lastCheck;
  if (!shownId) return null;
  const read = await call(`/fhir/CoverageEligibilityRequest/${encodeURIComponent(shownId)}`);
  if (read.status !== 200) {
    progress(outcomeText(read.json, read.status));
    return null;
  }
  const request = read.json;
  const byId = (ref) => (request.contained ?? []).find((r) => `#${r.id}` === ref);
  const patient = byId(request.patient?.reference);
  const patientId = patient?.identifier?.[0]?.value;
  const patientName = patient?.name?.[0]?.text;
  const payer = byId(request.insurer?.reference);
  const payerCode = request.purpose?.includes('discovery')
    ? ALL_PAYERS
    : (payer?.identifier?.[0]?.value ?? request.insurer?.identifier?.value);
  const coding = request.item?.[0]?.category?.coding?.[0];
  if (!patientId || !payerCode) {
    progress('This check cannot be repeated from here: start a new one.');
    return null;
  }
  return {
    patientId,
    patientName,
    payerCode,
    payerName: payer?.name ?? request.insurer?.display ?? payerCode,
    visitType: coding ? `${coding.system}|${coding.code}` : $('visit-type').value,
  };
}

/** The typo guard under the Emirates ID field, as soon as the value is complete (app/emirates-id.js). */
function checkPatientId() {
  const field = $('patient-id');
  const problem = emiratesIdProblem(field.value.trim());
  const text = problem ? PROBLEM_TEXT[problem] : '';
  // The form is not sent while the browser holds the field invalid.
  field.setCustomValidity(text);
  field.setAttribute('aria-invalid', problem ? 'true' : 'false');
  $('patient-id-problem').textContent = text;
}

// ---------------------------------------------------------------- recent checks

async function loadRecent() {
  // Newest check first: a later version of an older answer (a note about its documents) does not
  // move it above the check just made.
  const params = new URLSearchParams({
    _count: '10',
    _sort: '-created',
    _include: 'CoverageEligibilityResponse:request',
  });
  const outcome = $('recent-outcome').value;
  const search = $('recent-search').value.trim();
  if (outcome) params.set('outcome', outcome);
  // A patient's past answers, as far back as the store keeps them (an answer with kept documents
  // stays EVIDENCE_RETENTION_DAYS): more of them, each opened with its proof.
  if (search) {
    params.set('patient', search);
    params.set('_count', '50');
  }
  const found = await call(`/fhir/CoverageEligibilityResponse?${params}`);
  if (found.status === 401) return signOut();
  const list = $('recent-list');
  if (found.status !== 200) {
    $('recent-note').textContent = outcomeText(found.json, found.status);
    list.replaceChildren();
    return;
  }
  const resources = (found.json.entry ?? []).map((e) => e.resource).filter(Boolean);
  const cers = resources.filter((r) => r.resourceType === 'CoverageEligibilityResponse');
  const requests = new Map(
    resources
      .filter((r) => r.resourceType === 'CoverageEligibilityRequest')
      .map((r) => [`CoverageEligibilityRequest/${r.id}`, r]),
  );
  const who = await whoseChecks(cers, requests);
  $('recent-note').textContent = cers.length === 0 ? 'No checks match.' : '';
  list.replaceChildren(
    ...cers.map((cer) =>
      el(
        'li',
        {},
        badge(cer),
        ' ',
        bdi(who.get(cer.id) ?? ''),
        ' ',
        bdi(cer.insurer?.display ?? cer.insurer?.identifier?.value ?? ''),
        ' ',
        el('time', { datetime: cer.created ?? '', text: when(cer.created) }),
        ' ',
        el(
          'button',
          { type: 'button', onclick: () => showRecent(cer, requests.get(cer.request?.reference)) },
          'Show',
        ),
      ),
    ),
  );
}

/**
 * Whose check each row is: the patient's name typed for it; for a check made without one, the
 * policy holder's name the payer portal returned, else the identifier masked to its last digits
 * (from /app/api/recent-names: the full identifier is never shown in the list).
 */
async function whoseChecks(cers, requests) {
  const who = new Map();
  const unnamed = [];
  for (const cer of cers) {
    const name = patientNameOf(requests.get(cer.request?.reference));
    if (name) who.set(cer.id, name);
    else if (cer.id) unnamed.push(cer.id);
  }
  if (unnamed.length === 0) return who;
  const params = new URLSearchParams(unnamed.map((id) => ['id', id]));
  const found = await call(`/app/api/recent-names?${params}`);
  for (const { id, text, source } of found.status === 200 ? found.json.names : []) {
    who.set(id, source === 'portal' ? `${text} (policy holder)` : text);
  }
  for (const id of unnamed) if (!who.has(id)) who.set(id, 'Patient not named');
  return who;
}

/** The patient's name in a stored request (its contained Patient), or ''. */
function patientNameOf(request) {
  if (!request) return '';
  const ref = request.patient?.reference;
  const patient = (request.contained ?? []).find((r) => `#${r.id}` === ref);
  const name = patient?.name?.[0];
  return name?.text ?? [...(name?.given ?? []), name?.family].filter(Boolean).join(' ');
}

/** The outcome in words, coloured by what it means for the desk (the words carry it too). */
function badge(cer) {
  const { words, tone } = outcomeBadge(cer);
  return el('span', { class: `badge ${tone}`, text: words });
}

function showRecent(cer, request) {
  stopPolling();
  if (cer.outcome === 'queued') {
    void follow(`/fhir/CoverageEligibilityResponse/${encodeURIComponent(cer.id)}`, null);
    return;
  }
  progress('');
  const coding = request?.item?.[0]?.category?.coding?.[0];
  showResult(cer, coding ? `${coding.system}|${coding.code}` : undefined);
  $('result').scrollIntoView();
  $('outcome').focus();
}

// ---------------------------------------------------------------- operator view

function table(caption, headers, rows, empty) {
  if (rows.length === 0) return el('p', { text: empty });
  return el(
    'div',
    { class: 'table-scroll', tabindex: '0', role: 'region', 'aria-label': caption },
    el(
      'table',
      {},
      el('thead', {}, el('tr', {}, ...headers.map((h) => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, ...rows.map((cells) => el('tr', {}, ...cells.map((c) => el('td', {}, c))))),
    ),
  );
}

async function loadOperator() {
  const view = await call('/app/api/operator');
  if (view.status === 401) return signOut();
  if (view.status !== 200) {
    $('operator-note').textContent = outcomeText(view.json, view.status);
    return;
  }
  const { guards, stuck, queues, ehrSchedule } = view.json;
  showEhrSchedule(ehrSchedule ?? null);
  $('guards').replaceChildren(
    table(
      'Open guards table',
      ['Payer', 'Kind', 'Since', 'Until', ''],
      guards.map((g) => [
        bdi(g.payer),
        g.kind === 'credentials' ? 'Payer login refused' : 'Payer asked to back off',
        when(g.openedAt),
        g.until ? when(g.until) : 'until reset',
        el(
          'button',
          { type: 'button', onclick: () => void reset(g.payer) },
          'Reset',
          el('span', { class: 'visually-hidden', text: ` guard of ${g.payer}` }),
        ),
      ]),
      'No open guards: every payer is reachable.',
    ),
  );
  $('stuck').replaceChildren(
    table(
      'Overdue checks table',
      ['Check', 'Payer', 'State', 'Portal status', 'Since', 'Overdue since'],
      stuck.map((c) => [
        c.id,
        bdi(c.payer),
        c.state,
        c.upstreamStatus,
        when(c.createdAt),
        when(c.deadlineAt),
      ]),
      'No stuck checks.',
    ),
  );
  // The line per class: desk work goes first; background work (appointments, batches) never
  // holds the desk's slots (docs/queue.md).
  $('queues').replaceChildren(
    table(
      'Checks per clinic and class table',
      ['Clinic', 'Class', 'Waiting', 'Running', 'Slots'],
      queues.flatMap((q) => [
        [
          bdi(q.clinic),
          'Desk',
          String(q.desk.waiting),
          String(q.desk.running),
          `${q.maxInFlight} (${q.deskSlots} kept for the desk)`,
        ],
        [
          bdi(q.clinic),
          'Background',
          String(q.background.waiting),
          String(q.background.running),
          String(q.maxInFlight - q.deskSlots),
        ],
      ]),
      'No queue.',
    ),
  );
}

async function reset(payer) {
  const answer = await call(`/app/api/guards/${encodeURIComponent(payer)}/reset`, { method: 'POST' });
  if (answer.status === 401) return signOut();
  $('operator-note').textContent =
    answer.status === 204
      ? `Guard of ${payer} reset: checks reach that payer again.`
      : outcomeText(answer.json, answer.status);
  await loadOperator();
  $('operator-refresh').focus();
}

// ---------------------------------------------------------------- wiring

function start() {
  $('sign-in-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const key = $('api-key').value.trim();
    $('sign-in-error').textContent = '';
    void signIn(key).then((error) => {
      if (error) $('sign-in-error').textContent = error;
    });
  });
  $('sign-out').addEventListener('click', () => {
    if (session.person) void endSession();
    else signOut();
  });
  // A link, not a form: the sign-in goes on at the clinic's own sign-in service (another origin).
  $('clinic-id').addEventListener('input', clinicLink);
  $('clinic-id').addEventListener('keydown', (event) => {
    if (event.key === 'Enter') $('clinic-sign-in-link').click();
  });
  $('clinic-sign-in-link').addEventListener('click', (event) => {
    if ($('clinic-id').value.trim() !== '') return;
    event.preventDefault();
    $('clinic-id').focus();
  });
  for (const id of ['tab-desk', 'tab-operator']) {
    $(id).addEventListener('click', () => selectTab(id === 'tab-desk' ? 'desk' : 'operator'));
    $(id).addEventListener('keydown', tabKeys);
  }
  $('check-form').addEventListener('submit', (event) => {
    event.preventDefault();
    submitForm();
  });
  $('payer').addEventListener('input', showPayerName);
  $('patient-id').addEventListener('input', checkPatientId);
  $('estimate-form').addEventListener('submit', (event) => {
    event.preventDefault();
    void askEstimate();
  });
  $('check-again').addEventListener('click', () => void checkAgain());
  startAppointments(openAnswer, signOut);
  $('recent-form').addEventListener('submit', (event) => {
    event.preventDefault();
    void loadRecent();
  });
  $('recent-outcome').addEventListener('change', () => void loadRecent());
  $('operator-refresh').addEventListener('click', () => void loadOperator());
  startEhrSchedule(loadOperator, signOut);
  // A link followed in a tab where the page is already open only changes the hash: open it too
  // (signed out, sign-in opens it).
  window.addEventListener('hashchange', () => {
    if (session.key || session.person) openLinkedAnswer();
  });
  void resume();
}

/** A clinic whose people sign in with their clinic account is offered only that (docs/signin.md). */
async function offerClinicAccount(clinic) {
  const response = await fetch(`/app/sign-in-options?tenant=${encodeURIComponent(clinic)}`, {
    headers: { Accept: 'application/json' },
    credentials: 'omit',
  }).catch(() => null);
  const options = response?.ok ? await response.json() : null;
  if (!options?.clinicAccount) return;
  $('sign-in-form').hidden = true;
  $('sign-in-or').hidden = true;
  $('clinic-sign-in-link').focus();
}

function clinicLink() {
  const clinic = $('clinic-id').value.trim();
  $('clinic-sign-in-link').href = `/app/login?tenant=${encodeURIComponent(clinic)}`;
}

/** A person's session (after the clinic's sign-in sent the browser back here), else the tab's key. */
async function resume() {
  const clinic = new URLSearchParams(window.location.search).get('tenant');
  if (clinic) $('clinic-id').value = clinic;
  clinicLink();
  if (clinic) void offerClinicAccount(clinic);
  const person = await readSession().catch(() => null);
  if (person) {
    session.person = person;
    const payers = await call('/app/api/payers');
    const error = payers.status === 200 ? await enter(payers) : outcomeText(payers.json, payers.status);
    if (error) signOut();
    return;
  }
  if (session.key) {
    void signIn(session.key).then((error) => {
      if (error) signOut();
    });
  }
}

start();
