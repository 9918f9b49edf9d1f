/**
 * The Appointments section (docs/previsit.md): the appointments of a chosen day (default today in
 * the clinic's time zone), one row each with its time, the patient's name as given, the payer and
 * its state in words (`Not checked: <reason>` for one read from the EHR's schedule that could not
 * be checked), where it came from when the row does not say (`EHR schedule`, `CDS hook`), each
 * opening its latest answer in the result section. On a narrow screen
 * each row is a card of `column: value` lines (style.css); an empty day shows only its sentence.
 */
import { call, outcomeText } from './api.js';
import { $, bdi, el } from './dom.js';

const cell = (label, text) => el('td', { text, 'data-label': label });

/** A name or payer that may be Arabic, isolated (and cleaned of bidi controls) inside this page. */
const isolated = (label, text) => el('td', { 'data-label': label }, bdi(text));

/** Counts the loads begun: only the latest one's answer is shown. */
let loads = 0;

/**
 * Loads the day's appointments; `open(path)` shows an answer. Returns the HTTP status. Loads may
 * overlap (a date input can fire `change` twice for one pick, or the person picks again before an
 * answer came): an answer that arrives after a newer load began is dropped, so the list never
 * shows a day other than the one chosen last, and never redraws rows under the person's eyes.
 */
export async function loadAppointments(open) {
  const load = (loads += 1);
  const day = $('appointments-day').value;
  const found = await call(`/app/api/appointments${day ? `?day=${encodeURIComponent(day)}` : ''}`);
  if (load !== loads) return found.status;
  const body = $('appointments-rows');
  if (found.status !== 200) {
    $('appointments-note').textContent = outcomeText(found.json, found.status);
    body.replaceChildren();
    $('appointments-table').hidden = true;
    return found.status;
  }
  if (!day) $('appointments-day').value = found.json.day;
  const rows = found.json.rows;
  $('appointments-note').textContent = rows.length === 0 ? 'No appointments on this day.' : '';
  // No header without rows: an empty day is the sentence alone.
  $('appointments-table').hidden = rows.length === 0;
  body.replaceChildren(
    ...rows.map((row) => {
      const tr = document.createElement('tr');
      // An appointment not checked has no answer to open: its state says why.
      let action = el('td', { class: 'action' });
      if (row.answer) {
        const button = el('button', {
          text: 'Open',
          type: 'button',
          'aria-label': `Open the answer for ${row.time}`,
        });
        button.addEventListener('click', () => open(row.answer));
        action = el('td', { class: 'action' }, button);
      }
      tr.append(
        cell('Time', row.time),
        isolated('Patient', row.name),
        isolated('Payer', row.payer),
        cell('State', row.state),
        cell('From', row.source ?? ''),
        action,
      );
      return tr;
    }),
  );
  return found.status;
}

/** Wires the day input: a change loads that day. `signedOut()` when the service no longer knows the caller. */
export function startAppointments(open, signedOut) {
  const load = () =>
    void loadAppointments(open).then((status) => {
      if (status === 401) signedOut();
    });
  $('appointments-form').addEventListener('submit', (event) => {
    event.preventDefault();
    load();
  });
  $('appointments-day').addEventListener('change', load);
}
