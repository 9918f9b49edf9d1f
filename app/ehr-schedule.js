/**
 * The operator view's section on the schedule read from the EHR (docs/ehr-schedule.md): when it
 * was last read, how that went and what it found, and a button that reads it now. Hidden for a
 * clinic that does not read its schedule from an EHR.
 */
import { call, outcomeText } from './api.js';
import { when } from './clock.js';
import { $ } from './dom.js';

const OUTCOMES = {
  ok: 'read',
  'ehr-unavailable': 'the EHR could not be reached; tried again next round',
  'ehr-refused': 'the EHR refused the adapter (check its registration)',
  'ehr-garbage': 'the EHR answered something that is not FHIR; tried again next round',
  failed: 'the round failed; tried again next round',
};

/** The last round in one sentence. */
function lastRoundText(view) {
  const last = view.last;
  if (!last) return 'Not read yet.';
  const found =
    last.outcome === 'ok'
      ? `: ${last.read} appointments, ${last.booked} booked, ${last.moved} moved, ${last.cancelled} cancelled, ${last.notChecked} not checked`
      : last.problem
        ? ` (${last.problem})`
        : '';
  return `Last read ${when(last.at)}: ${OUTCOMES[last.outcome] ?? last.outcome}${found}.`;
}

/** Shows the section from the operator view's `ehrSchedule` (null: hidden). */
export function showEhrSchedule(view) {
  $('ehr-schedule-section').hidden = !view;
  if (view) $('ehr-schedule-last').textContent = lastRoundText(view);
}

/** Wires the button: a round now, then the view again once it has had time to run. */
export function startEhrSchedule(reload, signedOut) {
  $('ehr-schedule-read').addEventListener('click', () => {
    void call('/app/api/ehr-schedule/rounds', { method: 'POST' }).then(async (answer) => {
      if (answer.status === 401) return signedOut();
      if (answer.status !== 202) {
        $('ehr-schedule-note').textContent = outcomeText(answer.json, answer.status);
        return;
      }
      $('ehr-schedule-note').textContent = 'Reading the schedule from the EHR…';
      const before = $('ehr-schedule-last').textContent;
      // Until the last round is another one (about a second; at most 30 s).
      for (let i = 0; i < 30; i += 1) {
        await new Promise((resolve) => setTimeout(resolve, 1000));
        await reload();
        if ($('ehr-schedule-last').textContent !== before) break;
      }
      $('ehr-schedule-note').textContent = '';
    });
  });
}
