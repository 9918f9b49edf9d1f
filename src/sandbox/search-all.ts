/**
 * Search-all plans of the sandbox, as data: which payers answer a search-all, when, and with what
 * (docs/upstream.md, "Search-all tasks"). Timings are at timeScale 1.
 */

export type SearchAllPlanName =
  | 'two-eligible'
  | 'none-found'
  | 'one-found'
  | 'first-found'
  | 'aggregator'
  | 'failed-mid-search'
  | 'late-answers';

/** One payer's answer in a search-all plan. */
export interface Responder {
  payer: string;
  /** When the payer answers, ms after creation at timeScale 1. */
  atMs: number;
  status:
    'found' | 'member_found' | 'member_not_found' | 'tpa_not_configured' | 'invalid_credentials' | 'failed';
  isEligible?: boolean;
  /** The one aggregator of completion rule 3. */
  aggregator?: boolean;
  /** false: the answer lacks the internal payer key, so eligibility-result omits it (task-status keeps it). */
  hasInternalKey?: boolean;
}

export interface SearchAllPlan {
  responders: readonly Responder[];
  /** When the dispatching check finishes (top-level PROCESS_COMPLETE), ms at timeScale 1. */
  finishMs: number;
  /** Top-level status at finishMs; PROCESS_COMPLETE unless the task fails mid-search. */
  terminal?: 'PROCESS_COMPLETE' | 'FAILED';
}

type Answer = [payer: string, status: Responder['status'], extra?: Partial<Responder>];

/** Responders spaced `stepMs` apart from `startMs`. */
function spaced(startMs: number, stepMs: number, answers: Answer[]): Responder[] {
  return answers.map(([payer, status, extra], i) => ({
    payer,
    status,
    atMs: startMs + i * stepMs,
    ...extra,
  }));
}

const MNF = 'member_not_found' as const;

/**
 * Search-all plans. Completion (eligibility-result): 17 answers, or every answer found the member,
 * or a single aggregator answered and the check finished (docs/upstream.md, "Search-all tasks").
 */
export const SEARCH_ALL_PLANS: Readonly<Record<SearchAllPlanName, SearchAllPlan>> = {
  // Complete at the 17th answer while the task is still NAVIGATING_WEBSITE; MSH lacks the internal key.
  'two-eligible': {
    responders: spaced(500, 150, [
      ['NAS', MNF],
      ['MEDNET', MNF],
      ['DAMAN', 'found', { isEligible: true }],
      ['NEXTCARE', MNF],
      ['ADNIC', MNF],
      ['AXA', MNF],
      ['METLIFE', MNF],
      ['ALMADALLAH', MNF],
      ['NEURON', MNF],
      ['THIQA', 'member_found', { isEligible: true }],
      ['FMC', MNF],
      ['GIG', 'tpa_not_configured'],
      ['ORIENT', MNF],
      ['SUKOON', MNF],
      ['WATANIA', MNF],
      ['INAYAH', 'failed'],
      ['LIFELINE', MNF],
      ['ALBUHAIRA', MNF],
      ['MSH', MNF, { hasInternalKey: false }],
    ]),
    finishMs: 3800,
  },
  'none-found': {
    responders: spaced(500, 150, [
      ['DAMAN', MNF],
      ['THIQA', MNF],
      ['NAS', MNF],
      ['NEXTCARE', MNF],
      ['MEDNET', MNF],
      ['ADNIC', 'invalid_credentials'],
      ['AXA', MNF],
      ['METLIFE', MNF],
      ['ALMADALLAH', MNF],
      ['NEURON', MNF],
      ['FMC', MNF],
      ['GIG', 'tpa_not_configured'],
      ['ORIENT', MNF],
      ['SUKOON', MNF],
      ['WATANIA', 'tpa_not_configured'],
      ['INAYAH', MNF],
      ['LIFELINE', MNF],
      ['ALBUHAIRA', MNF],
    ]),
    finishMs: 3500,
  },
  'one-found': {
    responders: spaced(500, 150, [
      ['NAS', MNF],
      ['DAMAN', MNF],
      ['THIQA', MNF],
      ['MEDNET', MNF],
      ['ADNIC', MNF],
      ['AXA', MNF],
      ['METLIFE', MNF],
      ['ALMADALLAH', MNF],
      ['NEXTCARE', 'found', { isEligible: true }],
      ['NEURON', MNF],
      ['FMC', MNF],
      ['GIG', MNF],
      ['ORIENT', MNF],
      ['SUKOON', MNF],
      ['WATANIA', MNF],
      ['INAYAH', MNF],
      ['LIFELINE', MNF],
      ['ALBUHAIRA', MNF],
    ]),
    finishMs: 3500,
  },
  // Rule 2: the first (and only) answer found the member, so the search completes with one entry.
  'first-found': {
    responders: spaced(600, 0, [['DAMAN', 'found', { isEligible: true }]]),
    finishMs: 1500,
  },
  // Rule 3: one aggregator answered; complete once the dispatching check finishes.
  aggregator: {
    responders: spaced(600, 0, [['NEXTCARE', MNF, { aggregator: true }]]),
    finishMs: 1500,
  },
  // The dispatching task ends (PROCESS_COMPLETE at 1 s) long before the search completes (the
  // 17th answer at 3 s): the payers answer late. None found.
  'late-answers': {
    responders: spaced(200, 175, [
      ['NAS', MNF],
      ['MEDNET', MNF],
      ['DAMAN', MNF],
      ['NEXTCARE', MNF],
      ['ADNIC', MNF],
      ['AXA', MNF],
      ['METLIFE', MNF],
      ['ALMADALLAH', MNF],
      ['NEURON', MNF],
      ['THIQA', MNF],
      ['FMC', MNF],
      ['GIG', MNF],
      ['ORIENT', MNF],
      ['SUKOON', MNF],
      ['WATANIA', MNF],
      ['INAYAH', MNF],
      ['LIFELINE', MNF],
    ]),
    finishMs: 1000,
  },
  // The task fails after three answers, before any completion rule holds: status FAILED while
  // search_all_status is still SEARCH_ALL_PROCESSING.
  'failed-mid-search': {
    responders: spaced(500, 200, [
      ['NAS', MNF],
      ['MEDNET', MNF],
      ['DAMAN', 'found', { isEligible: true }],
    ]),
    finishMs: 1400,
    terminal: 'FAILED',
  },
};
