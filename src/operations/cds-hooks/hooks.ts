/**
 * The two CDS Services (https://cds-hooks.hl7.org/2.0/#calling-a-cds-service): each reads the
 * request, the patient's data (prefetch or the guarded FHIR client), and answers at once with
 * cards (https://cds-hooks.hl7.org/2.0/#http-response). A hook never waits on the payer portal:
 * a check it starts is accepted through the same CheckService path `$submit` uses and runs in the
 * background; the card says so.
 */
import type { Patient } from 'fhir/r4.js';
import type { CdsClient, Tenant } from '../../config.js';
import type { AcceptSource, CheckService } from '../../checks/service.js';
import type { Check } from '../../checks/store/check-store.js';
import { isAnswered } from '../../checks/store/check-store.js';
import { isOperationOutcomeError } from '../../fhir/outcomes.js';
import type { CheckInput } from '../../mapping/types.js';
import { EMIRATES_ID_PROBLEM_SHORT, emiratesIdProblemOfText } from '../../mapping/request/patient.js';
import { checkCard, problemCard, scrubberOf, type Card, type CardContext } from './cards.js';
import {
  checkInputs,
  coverageParser,
  lookupKeys,
  type HookCheck,
  type LookupKeys,
} from '../../mapping/request/check-input.js';
import type { GuardedFhirClient } from './fhir-server.js';
import { patientData } from './prefetch.js';
import { appointmentsOf, readCdsRequest } from './request.js';
import { startedAt } from './visit-time.js';

export interface HookDeps {
  checks: CheckService;
  fhir: GuardedFhirClient;
  baseUrl: string;
  now: () => number;
}

/** A hook's answer: the cards, and the checks they are about (the audit trail's entities). */
export interface HookAnswer {
  cards: Card[];
  checkIds: string[];
}

const NOT_CHECKED = 'Eligibility not checked';
const INCOMPLETE = `${NOT_CHECKED}: the insurance record is incomplete`;

/** What the card may not show: the patient's identifier values, phone numbers and birth date. */
function secretsOf(patient: Patient, inputs: readonly CheckInput[]): string[] {
  return [
    ...(patient.identifier ?? []).flatMap((i) => (i.value ? [i.value] : [])),
    ...(patient.telecom ?? []).flatMap((t) => (t.value ? [t.value] : [])),
    ...(patient.birthDate ? [patient.birthDate] : []),
    ...inputs.flatMap((i) => [i.upstream.emirates_id, i.upstream.phone, i.upstream.dob ?? '']),
  ].filter((value) => value.length > 0);
}

/** The words of a check that could not be made from the record (the $submit refusal's text). */
function refusalText(error: unknown): string {
  if (isOperationOutcomeError(error))
    return error.outcome.issue.map((i) => i.details?.text ?? i.diagnostics ?? i.code).join(' ');
  throw error;
}

/**
 * The card of a check refused before it started: the summary (what the desk sees without a click)
 * names a mistyped or placeholder Emirates ID (the typo guard); any other refusal is `otherwise`.
 */
function refusalCard(error: unknown, otherwise: string, context: CardContext): Card {
  const text = refusalText(error);
  const problem = isOperationOutcomeError(error)
    ? error.outcome.issue
        .map((i) => (i.details?.text ? emiratesIdProblemOfText(i.details.text) : undefined))
        .find((found) => found !== undefined)
    : undefined;
  const summary = problem ? `${NOT_CHECKED}: ${EMIRATES_ID_PROBLEM_SHORT[problem]}` : otherwise;
  return problemCard(summary, text, context);
}

/** appointment-book (https://cds-hooks.org/hooks/appointment-book/): one check and card per appointment. */
export async function appointmentBook(
  body: unknown,
  caller: { tenant: Tenant; client: CdsClient },
  deps: HookDeps,
): Promise<HookAnswer> {
  const request = readCdsRequest(body, 'appointment-book');
  // The appointments are read first: a bad body is a 400 before anything is fetched.
  const appointments = appointmentsOf(request.context);
  const data = await patientData(request, caller.client, deps.fhir);
  const cards: Card[] = [];
  const checkIds: string[] = [];
  const context = (inputs: readonly CheckInput[]): CardContext => ({
    baseUrl: deps.baseUrl,
    scrub: scrubberOf(secretsOf(data.patient, inputs)),
  });
  if (data.coverages.length === 0 && appointments.length > 0)
    return { cards: [noCoverageCard(context([]))], checkIds };
  for (const booked of appointments) {
    const checks = await checkInputs(data, {
      practiceId: caller.tenant.practiceId,
      checkDigit: caller.tenant.emiratesIdCheckDigit ?? 'refuse',
      now: deps.now(),
      ...(request.fhirServer ? { fhirServer: request.fhirServer } : {}),
      appointment: booked.appointment,
      identifierValue: (payer) =>
        payer === null
          ? `${request.hookInstance}/${booked.key}`
          : `${request.hookInstance}/${booked.key}/${payer}`,
    });
    const cardContext = context(checks.flatMap((c) => ('input' in c ? [c.input] : [])));
    const started = startedAt(
      booked.appointment.start,
      deps.checks.previsitSettings(caller.tenant),
      deps.now(),
    );
    for (const entry of checks) {
      const card = await cardOf(entry, caller.tenant, deps, cardContext, { started, source: 'appointment' });
      cards.push(card.card);
      if (card.checkId) checkIds.push(card.checkId);
    }
  }
  return { cards, checkIds };
}

/** patient-view (https://cds-hooks.org/hooks/patient-view/): one card per payer of the patient. */
export async function patientView(
  body: unknown,
  caller: { tenant: Tenant; client: CdsClient },
  deps: HookDeps,
): Promise<HookAnswer> {
  const request = readCdsRequest(body, 'patient-view');
  const data = await patientData(request, caller.client, deps.fhir);
  // The answers are looked up first: a chart whose payers all have one builds no check at all.
  const keys = await lookupKeys(data, request.fhirServer);
  const history = await patientHistory(deps.checks, caller.tenant, keys.patient);
  const parse = coverageParser(data, {
    practiceId: caller.tenant.practiceId,
    checkDigit: caller.tenant.emiratesIdCheckDigit ?? 'refuse',
    now: deps.now(),
    ...(request.fhirServer ? { fhirServer: request.fhirServer } : {}),
  });
  const context: CardContext = {
    baseUrl: deps.baseUrl,
    scrub: scrubberOf(secretsOf(data.patient, [])),
  };
  const cards: Card[] = [];
  const checkIds: string[] = [];
  const shown = new Set<string>();
  const show = (check: Check) => {
    shown.add(check.payerCode);
    cards.push(checkCard(check, context, { dated: isAnswered(check) }));
    checkIds.push(check.id);
  };
  // The payers of the Coverages first, in their order, then those only in the patient's answers.
  for (const [index, payer] of keys.payers.entries()) {
    if (payer !== undefined && shown.has(payer)) continue;
    const known = payer === undefined ? undefined : latestOf(history, payer);
    if (known) {
      show(known);
      continue;
    }
    let input: CheckInput;
    try {
      input = await parse(index);
    } catch (error) {
      cards.push(refusalCard(error, INCOMPLETE, context));
      continue;
    }
    if (shown.has(input.payerCode)) continue;
    shown.add(input.payerCode);
    const card = await cardOf({ coverageIndex: index, input }, caller.tenant, deps, context, {
      started: `Eligibility check started with ${input.upstream.payerName || input.payerCode}; the answer follows on the chart`,
    });
    cards.push(card.card);
    if (card.checkId) checkIds.push(card.checkId);
  }
  for (const check of history) {
    if (!shown.has(check.payerCode)) show(latestOf(history, check.payerCode)!);
  }
  if (cards.length === 0) cards.push(noCoverageCard(context));
  return { cards, checkIds };
}

/** The answers of the patient at this tenant, newest first (any age; search-alls left out). */
async function patientHistory(
  checks: CheckService,
  tenant: Tenant,
  patient: LookupKeys['patient'],
): Promise<Check[]> {
  if (patient === null) return [];
  const { checks: found } = await checks.store.search(
    tenant.id,
    { patient: [[patient]] },
    { count: 50, offset: 0, total: false },
  );
  return found.filter((c) => !c.isSearchAll);
}

/** The latest final answer for a payer, else its running check. */
function latestOf(history: readonly Check[], payer: string): Check | undefined {
  const ofPayer = history.filter((c) => c.payerCode === payer);
  return ofPayer.find((c) => isAnswered(c)) ?? ofPayer[0];
}

/** Accepts one check (as $submit) and makes its card; a refused one is a problem card. */
async function cardOf(
  entry: HookCheck | { coverageIndex: number; error: unknown },
  tenant: Tenant,
  deps: HookDeps,
  context: CardContext,
  options: { started: string; source?: AcceptSource },
): Promise<{ card: Card; checkId?: string }> {
  if (!('input' in entry))
    return {
      card: refusalCard(entry.error, INCOMPLETE, context),
    };
  try {
    // An appointment's check is background work; patient-view's is the desk's (docs/queue.md).
    const accepted = await deps.checks.accept(tenant, entry.input, {}, options.source ?? 'request');
    return {
      card: checkCard(accepted.check, context, options),
      checkId: accepted.check.id,
    };
  } catch (error) {
    return { card: refusalCard(error, NOT_CHECKED, context) };
  }
}

function noCoverageCard(context: CardContext): Card {
  return problemCard(
    'Eligibility not checked: no active insurance on file',
    'The patient has no active Coverage in the EHR, so no payer can be asked.',
    context,
  );
}
