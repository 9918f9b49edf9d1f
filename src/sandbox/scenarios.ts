/**
 * The sandbox's scenario table, as data: which identifier and payer code produce which upstream
 * behaviour. docs/sandbox.md and the README list these rows; the builders walk them.
 *
 * Identifiers are Emirates ID shaped, `784-YYYY-NNNNNNN-C`: the seven-digit serial NNNNNNN picks
 * the scenario (the year is free; the check digit is not read here, but the adapter refuses an ID
 * whose check digit is wrong, so every example has the right one). Card numbers (id_type CARDNUMBER) are matched on
 * their last seven digits. Anything unlisted is found eligible.
 */
import type { SearchAllPlanName } from './search-all.js';

/** Payer codes and display names (realistic UAE payers). Search-all queries all of them. */
export const PAYERS: Readonly<Record<string, string>> = {
  DAMAN: 'National Health Insurance Company - Daman',
  THIQA: 'Thiqa',
  NAS: 'NAS Administration Services',
  NEXTCARE: 'NEXtCARE',
  MEDNET: 'MedNet UAE',
  ADNIC: 'Abu Dhabi National Insurance Company',
  AXA: 'AXA Gulf',
  METLIFE: 'MetLife Alico',
  ALMADALLAH: 'Almadallah Healthcare Management',
  NEURON: 'Neuron',
  FMC: 'FMC Network Solutions',
  GIG: 'Gulf Insurance Group',
  ORIENT: 'Orient Insurance',
  SUKOON: 'Sukoon Insurance',
  WATANIA: 'Watania Takaful',
  INAYAH: 'Inayah TPA',
  LIFELINE: 'Lifeline Healthcare',
  ALBUHAIRA: 'Al Buhaira National Insurance',
  MSH: 'MSH International',
};

/** The payer code that asks for a search-all (an assumption named in the README). */
export const SEARCH_ALL_PAYER = 'ALL';

/** One in-flight phase: the status shown and how long it lasts at timeScale 1. */
export interface Phase {
  status: string;
  forMs: number;
}

export type TimelineName = 'standard' | 'jump' | 'slow' | 'new-status';

/**
 * In-flight phases per timeline; the terminal status follows the last phase. `jump` never reaches
 * a payer page, so it skips EXTRACTING_DATA (docs/upstream.md, "Task status").
 */
export const TIMELINES: Readonly<Record<TimelineName, readonly Phase[]>> = {
  standard: [
    { status: 'IN_QUEUE', forMs: 400 },
    { status: 'NAVIGATING_WEBSITE', forMs: 1600 },
    { status: 'EXTRACTING_DATA', forMs: 1000 },
  ],
  jump: [
    { status: 'IN_QUEUE', forMs: 400 },
    { status: 'NAVIGATING_WEBSITE', forMs: 1100 },
  ],
  slow: [
    { status: 'IN_QUEUE', forMs: 400 },
    { status: 'NAVIGATING_WEBSITE', forMs: 600_000 },
    { status: 'EXTRACTING_DATA', forMs: 1000 },
  ],
  'new-status': [
    { status: 'IN_QUEUE', forMs: 400 },
    { status: 'NAVIGATING_WEBSITE', forMs: 800 },
    { status: 'VERIFYING_MEMBER', forMs: 800 },
    { status: 'EXTRACTING_DATA', forMs: 1000 },
  ],
};

/** What a single-payer task ends with. */
export type ResultKind =
  | 'eligible'
  | 'not-eligible'
  | 'member-not-found'
  | 'invalid-credentials'
  | 'failed'
  | 'error'
  | 'backoff'
  | 'tpa-not-configured'
  | 'multi-card'
  | 'task-failed'
  | 'cancelled';

/** Timeline and terminal status per result kind. */
export const RESULT_FLOW: Readonly<
  Record<ResultKind, { timeline: TimelineName; terminal: 'PROCESS_COMPLETE' | 'FAILED' | 'CANCELLED' }>
> = {
  eligible: { timeline: 'standard', terminal: 'PROCESS_COMPLETE' },
  'not-eligible': { timeline: 'standard', terminal: 'PROCESS_COMPLETE' },
  'member-not-found': { timeline: 'standard', terminal: 'PROCESS_COMPLETE' },
  'invalid-credentials': { timeline: 'jump', terminal: 'PROCESS_COMPLETE' },
  failed: { timeline: 'jump', terminal: 'PROCESS_COMPLETE' },
  error: { timeline: 'standard', terminal: 'PROCESS_COMPLETE' },
  backoff: { timeline: 'jump', terminal: 'PROCESS_COMPLETE' },
  'tpa-not-configured': { timeline: 'jump', terminal: 'PROCESS_COMPLETE' },
  'multi-card': { timeline: 'standard', terminal: 'PROCESS_COMPLETE' },
  'task-failed': { timeline: 'jump', terminal: 'FAILED' },
  cancelled: { timeline: 'jump', terminal: 'CANCELLED' },
};

/** error_type and message carried on the outcomes without a data block. */
export const ERROR_OUTCOMES: Readonly<
  Partial<Record<ResultKind, { status: string; error_type: string; message: string }>>
> = {
  'invalid-credentials': {
    status: 'invalid_credentials',
    error_type: 'INVALID_CREDENTIALS',
    message: 'The payer portal rejected the clinic credentials. Update them before checking again.',
  },
  failed: {
    status: 'failed',
    error_type: 'PORTAL_TIMEOUT',
    message: 'The payer portal did not answer in time; the check did not complete.',
  },
  error: {
    status: 'error',
    error_type: 'UNEXPECTED_ERROR',
    message: 'An unexpected error occurred while reading the payer response.',
  },
  backoff: {
    status: 'backoff',
    error_type: 'CREDENTIAL_BACKOFF',
    message: 'Too many recent credential failures for this payer; checks are paused for a while.',
  },
  'task-failed': {
    status: 'error',
    error_type: 'TASK_FAILED',
    message: 'The task failed before a result was produced.',
  },
};

/** Which identifiers a row matches: Emirates IDs, card numbers, or both. */
export type IdKind = 'any' | 'emirates-id' | 'card';

/** One row of the scenario table. */
export interface Scenario {
  name: string;
  /** Seven-digit serial of the identifier; null for a payer-only row. */
  serial: string | null;
  idKind: IdKind;
  /** Payer code the row is limited to; null = any payer. */
  payer: string | null;
  /** An identifier that selects the row, for the docs and tests. */
  example: string;
  /** Single-payer outcome, one per create-task for the same identifier and payer (last repeats). */
  results?: readonly ResultKind[];
  /** Timeline override (default: from RESULT_FLOW). */
  timeline?: TimelineName;
  /** Search-all plan; set on rows used with tpa_name ALL. */
  searchAll?: SearchAllPlanName;
  summary: string;
}

/** The scenario table. Single-payer rows apply to any payer unless `payer` is set. */
export const SCENARIOS: readonly Scenario[] = [
  {
    name: 'eligible',
    serial: '0000001',
    idKind: 'any',
    payer: null,
    example: '784-1990-0000001-0',
    results: ['eligible'],
    summary:
      'found, is_eligible true; rich data: networks, copays (one "20%", one "12.5", one Not Covered), benefits, Outpatient+Maternity copays to fill, warnings, documents, is_gatekeeper Yes',
  },
  {
    name: 'not-eligible',
    serial: '0000002',
    idKind: 'any',
    payer: null,
    example: '784-1990-0000002-8',
    results: ['not-eligible'],
    summary: 'found, is_eligible false, failure_reason set (lapsed policy)',
  },
  {
    name: 'member-not-found',
    serial: '0000003',
    idKind: 'any',
    payer: null,
    example: '784-1990-0000003-6',
    results: ['member-not-found'],
    summary: 'member_not_found, show_data false, is_eligible false',
  },
  {
    name: 'invalid-credentials',
    serial: '0000004',
    idKind: 'any',
    payer: null,
    example: '784-1990-0000004-4',
    results: ['invalid-credentials'],
    summary: 'invalid_credentials with error_type and message; skips EXTRACTING_DATA',
  },
  {
    name: 'failed',
    serial: '0000005',
    idKind: 'any',
    payer: null,
    example: '784-1990-0000005-1',
    results: ['failed'],
    summary: 'failed with error_type and message (every time); skips EXTRACTING_DATA',
  },
  {
    name: 'error',
    serial: '0000006',
    idKind: 'any',
    payer: null,
    example: '784-1990-0000006-9',
    results: ['error'],
    summary: 'error with error_type and message (every time), after EXTRACTING_DATA',
  },
  {
    name: 'backoff',
    serial: '0000007',
    idKind: 'any',
    payer: null,
    example: '784-1990-0000007-7',
    results: ['backoff'],
    summary: 'backoff with error_type and message; skips EXTRACTING_DATA',
  },
  {
    name: 'tpa-not-configured',
    serial: '0000008',
    idKind: 'any',
    payer: null,
    example: '784-1990-0000008-5',
    results: ['tpa-not-configured'],
    summary: 'tpa_not_configured, is_eligible null; skips EXTRACTING_DATA',
  },
  {
    name: 'multi-card',
    serial: '0000009',
    idKind: 'any',
    payer: null,
    example: '784-1990-0000009-3',
    results: ['multi-card'],
    summary:
      'found eligible, card 2 of 3 (card_index 2, multi_card_total 3, card_number, package_name, card_network); id ends :card2',
  },
  {
    name: 'task-failed',
    serial: '0000010',
    idKind: 'any',
    payer: null,
    example: '784-1990-0000010-1',
    results: ['task-failed'],
    summary: 'top-level FAILED; eligibility_result status error with error_type TASK_FAILED',
  },
  {
    name: 'task-cancelled',
    serial: '0000011',
    idKind: 'any',
    payer: null,
    example: '784-1990-0000011-9',
    results: ['cancelled'],
    summary: 'top-level CANCELLED, no eligibility_result',
  },
  {
    name: 'slow',
    serial: '0000012',
    idKind: 'any',
    payer: null,
    example: '784-1990-0000012-7',
    results: ['eligible'],
    timeline: 'slow',
    summary: 'stays NAVIGATING_WEBSITE for ~10 minutes (at timeScale 1), then found eligible',
  },
  {
    name: 'new-status',
    serial: '0000013',
    idKind: 'any',
    payer: null,
    example: '784-1990-0000013-5',
    results: ['eligible'],
    timeline: 'new-status',
    summary: 'passes through an undocumented in-flight status VERIFYING_MEMBER, then found eligible',
  },
  {
    name: 'failed-then-found',
    serial: '0000014',
    idKind: 'any',
    payer: null,
    example: '784-1990-0000014-3',
    results: ['failed', 'eligible'],
    summary: 'first create-task for this identifier and payer: failed; every later one: found eligible',
  },
  {
    name: 'card-only-by-emirates-id',
    serial: '0000020',
    idKind: 'emirates-id',
    payer: null,
    example: '784-1990-0000020-0',
    results: ['member-not-found'],
    summary: 'member_not_found by Emirates ID (national id not linked at the payer)',
  },
  {
    name: 'card-only-by-card-number',
    serial: '0000020',
    idKind: 'card',
    payer: null,
    example: '4410-0000-0000020',
    results: ['eligible'],
    summary: 'the same member found eligible by card number (id_type CARDNUMBER)',
  },
  {
    name: 'payer-not-configured',
    serial: null,
    idKind: 'any',
    payer: 'NOCREDS',
    example: 'any identifier with tpa_name NOCREDS',
    results: ['tpa-not-configured'],
    summary:
      'a payer code outside the sandbox payer list (NOCREDS, or any unknown code): tpa_not_configured, the clinic has no credentials for it',
  },
  {
    name: 'search-all-two-eligible',
    serial: '0000031',
    idKind: 'any',
    payer: SEARCH_ALL_PAYER,
    example: '784-1990-0000031-7',
    searchAll: 'two-eligible',
    summary:
      'DAMAN (found) and THIQA (member_found) eligible among 19 answers; complete at 17 while status is still NAVIGATING_WEBSITE; MSH lacks the internal key',
  },
  {
    name: 'search-all-none-found',
    serial: '0000032',
    idKind: 'any',
    payer: SEARCH_ALL_PAYER,
    example: '784-1990-0000032-5',
    searchAll: 'none-found',
    summary:
      '18 answers, none found (member_not_found, tpa_not_configured, invalid_credentials); complete at 17',
  },
  {
    name: 'search-all-one-found',
    serial: '0000033',
    idKind: 'any',
    payer: SEARCH_ALL_PAYER,
    example: '784-1990-0000033-3',
    searchAll: 'one-found',
    summary:
      'NEXTCARE found eligible, the others member_not_found; complete at 17 (also the default search-all)',
  },
  {
    name: 'search-all-first-found',
    serial: '0000034',
    idKind: 'any',
    payer: SEARCH_ALL_PAYER,
    example: '784-1990-0000034-1',
    searchAll: 'first-found',
    summary: 'the first answer found the member: complete with one entry (rule 2)',
  },
  {
    name: 'search-all-aggregator',
    serial: '0000035',
    idKind: 'any',
    payer: SEARCH_ALL_PAYER,
    example: '784-1990-0000035-8',
    searchAll: 'aggregator',
    summary: 'a single aggregator answered member_not_found; complete once the check finishes (rule 3)',
  },
  {
    name: 'search-all-failed',
    serial: '0000036',
    idKind: 'any',
    payer: SEARCH_ALL_PAYER,
    example: '784-1990-0000036-6',
    searchAll: 'failed-mid-search',
    summary: 'three answers (DAMAN found), then the task ends FAILED before the search completes',
  },
  {
    name: 'search-all-late-answers',
    serial: '0000037',
    idKind: 'any',
    payer: SEARCH_ALL_PAYER,
    example: '784-1990-0000037-4',
    searchAll: 'late-answers',
    summary:
      'the task is PROCESS_COMPLETE at 1 s, the payers keep answering until the 17th at 3 s (complete), none found',
  },
];

/** Used when no row matches a single-payer request. */
export const DEFAULT_SCENARIO: Scenario = {
  name: 'default-eligible',
  serial: null,
  idKind: 'any',
  payer: null,
  example: 'any other identifier',
  results: ['eligible'],
  summary: 'found eligible (same data as "eligible")',
};

/** Used when no row matches a search-all request. */
export const DEFAULT_SEARCH_ALL_SCENARIO: Scenario = {
  name: 'default-search-all',
  serial: null,
  idKind: 'any',
  payer: SEARCH_ALL_PAYER,
  example: 'any other identifier with tpa_name ALL',
  searchAll: 'one-found',
  summary: 'as search-all-one-found',
};

/** The seven-digit serial of an identifier: NNNNNNN of an Emirates ID, the last 7 digits of a card. */
export function identifierSerial(identifier: string, idKind: 'emirates-id' | 'card'): string | null {
  const digits = identifier.replace(/\D/g, '');
  if (idKind === 'emirates-id') return /^784\d{12}$/.test(digits) ? digits.slice(7, 14) : null;
  return digits.length >= 7 ? digits.slice(-7) : null;
}

/**
 * Picks the scenario for a request: identifier + payer rows first, then identifier rows, then
 * payer-only rows, then the default. Search-all requests only see search-all rows.
 */
export function resolveScenario(request: {
  emirates_id: string;
  id_type: string;
  tpa_name: string;
  searchAll: boolean;
}): Scenario {
  const idKind = request.id_type.toUpperCase() === 'CARDNUMBER' ? 'card' : 'emirates-id';
  const serial = identifierSerial(request.emirates_id, idKind);
  const rows = SCENARIOS.filter((s) => Boolean(s.searchAll) === request.searchAll);
  // An unknown payer code: the clinic cannot hold credentials for it, whatever the identifier.
  const notConfigured = rows.find((s) => s.name === 'payer-not-configured');
  if (!request.searchAll && !(request.tpa_name in PAYERS) && notConfigured) return notConfigured;
  const kindOk = (s: Scenario) => s.idKind === 'any' || s.idKind === idKind;
  const byId = rows.filter((s) => s.serial !== null && s.serial === serial && kindOk(s));
  const match =
    byId.find((s) => s.payer === request.tpa_name) ??
    byId.find((s) => s.payer === null || request.searchAll) ??
    rows.find((s) => s.serial === null && s.payer === request.tpa_name);
  return match ?? (request.searchAll ? DEFAULT_SEARCH_ALL_SCENARIO : DEFAULT_SCENARIO);
}
