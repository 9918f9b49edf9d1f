/**
 * The Appointments section (docs/previsit.md): the appointments of a chosen day (default today in
 * the clinic's time zone), one row each with its time, the patient's name as given, the payer and
 * its state in words, each opening its latest answer in the result section.
 */
import { call, outcomeText } from './api.js';
import { $, bdi, el } from './dom.js';

const cell = (tag, text) => el(tag, { text });

/** A name or payer that may be Arabic, isolated (and cleaned of bidi controls) inside this page. */
const isolated = (text) => el('td', {}, bdi(text));

/** Loads the day's appointments; `open(path)` shows an answer. Returns the HTTP status. */
export async function loadAppointments(open) {
  const day = $('appointments-day').value;
  const found = await call(`/app/api/appointments${day ? `?day=${encodeURIComponent(day)}` : ''}`);
  const body = $('appointments-rows');
  if (found.status !== 200) {
    $('appointments-note').textContent = outcomeText(found.json, found.status);
    body.replaceChildren();
    return found.status;
  }
  if (!day) $('appointments-day').value = found.json.day;
  const rows = found.json.rows;
  $('appointments-note').textContent = rows.length === 0 ? 'No appointments on this day.' : '';
  body.replaceChildren(
    ...rows.map((row) => {
      const tr = document.createElement('tr');
      const button = cell('button', 'Open');
      button.type = 'button';
      button.setAttribute('aria-label', `Open the answer for ${row.time}`);
      button.addEventListener('click', () => open(row.answer));
      const action = document.createElement('td');
      action.append(button);
      tr.append(cell('td', row.time), isolated(row.name), isolated(row.payer), cell('td', row.state), action);
      return tr;
    }),
  );
  return found.status;
}

/** Wires the day input: a change loads that day. */
export function startAppointments(open) {
  $('appointments-form').addEventListener('submit', (event) => {
    event.preventDefault();
    void loadAppointments(open);
  });
  $('appointments-day').addEventListener('change', () => void loadAppointments(open));
}
