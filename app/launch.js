/**
 * Opened from the EHR (SMART App Launch, docs/smart-launch.md): the patient the EHR has open fills
 * the form (Emirates ID or card number, name, payer, visit date), and the latest answer for that
 * patient and payer is offered with when it was checked, beside one button to check (again).
 * The context comes from /app/api/launch-context; the EHR's token never reaches this page.
 */
import { call } from './api.js';
import { localDay, when } from './clock.js';
import { $, bdi, el } from './dom.js';

/** The launch's context, or null when this session was not opened from the EHR. */
export async function loadLaunchContext() {
  const answer = await call('/app/api/launch-context');
  return answer.status === 200 ? answer.json : null;
}

/** The visit the EHR gave: its start, while the date field still shows its day. */
let launchVisit = null;

/**
 * `serviced[x]` of a check from the form's visit date: the EHR appointment's start (with its time)
 * while the date is the appointment's, else the date typed; nothing without a date.
 */
export function servicedOf(day) {
  if (!day) return {};
  if (launchVisit && localDay(launchVisit) === day) return { servicedPeriod: { start: launchVisit } };
  return { servicedDate: day };
}

/**
 * Fills the form from the launch and shows the banner: `check(fresh)` runs the form's check (fresh:
 * a new portal session), `open(path)` shows a stored answer, `payerShown()` names the payer filled.
 */
export function showLaunch(context, { check, open, payerShown }) {
  $('patient-id').value = context.patient.identifier ?? '';
  $('patient-name').value = context.patient.name ?? '';
  if (context.payer) {
    $('payer').value = context.payer.code;
    payerShown();
  }
  launchVisit = context.visitStart;
  $('visit-date').value = localDay(context.visitStart);
  // The date field only where the EHR gave a visit: the desk's keyboard path is unchanged otherwise.
  $('visit-date-field').hidden = !context.visitStart;
  const latest = context.latest;
  const summary = latest
    ? ['Last checked ', el('time', { datetime: latest.checkedAt, text: when(latest.checkedAt) }), '.']
    : ['Not checked yet for this payer.'];
  const missing = context.patient.identifier
    ? []
    : [
        el('p', {
          class: 'error',
          text: 'The EHR has no Emirates ID or card number for this patient: type it.',
        }),
      ];
  $('launch').replaceChildren(
    el('h2', { id: 'launch-title' }, 'Opened from the EHR: ', bdi(context.patient.name || 'patient')),
    el('p', {}, ...summary),
    ...missing,
    el(
      'div',
      { class: 'actions' },
      latest
        ? el('button', { type: 'button', onclick: () => open(latest.answer) }, 'Show the latest answer')
        : '',
      el(
        'button',
        { type: 'button', onclick: () => check(Boolean(latest)) },
        latest ? 'Check again' : 'Check eligibility now',
      ),
    ),
  );
  $('launch').hidden = false;
  // The latest answer is what the desk reads first: shown at once, below.
  if (latest) open(latest.answer);
}
