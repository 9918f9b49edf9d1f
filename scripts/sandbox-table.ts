/**
 * Renders the sandbox scenario table (src/sandbox/scenarios.ts) into docs/sandbox.md
 * between the `sandbox-scenarios` markers, and the payers' duration profiles of one seed
 * (src/sandbox/durations.ts) between the `sandbox-durations` markers, so the docs cannot drift
 * from what the sandbox does.
 *   npm run docs:sandbox            rewrite docs/sandbox.md
 * test/unit/readme.test.ts fails when docs/sandbox.md is out of date.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  DEFAULT_SCENARIO,
  DEFAULT_SEARCH_ALL_SCENARIO,
  PAYERS,
  SCENARIOS,
} from '../src/sandbox/scenarios.js';
import { payerProfile } from '../src/sandbox/durations.js';

/** The file that holds the generated table. */
export const SANDBOX_DOC = fileURLToPath(new URL('../docs/sandbox.md', import.meta.url));
const START = '<!-- sandbox-scenarios:start -->';
const END = '<!-- sandbox-scenarios:end -->';

function cell(text: string): string {
  return text.replace(/\|/g, '\\|');
}

/** The markdown block between the markers. */
export function scenarioBlock(): string {
  const rows = [...SCENARIOS, DEFAULT_SCENARIO, DEFAULT_SEARCH_ALL_SCENARIO].map((s) => {
    const payer = s.payer === 'ALL' ? 'search-all (`purpose` = `discovery`)' : (s.payer ?? 'any');
    return `| \`${cell(s.example)}\` | ${cell(payer)} | ${s.name} | ${cell(s.summary)} |`;
  });
  return [
    START,
    '',
    '| identifier | payer | scenario | what you will see upstream |',
    '| --- | --- | --- | --- |',
    ...rows,
    '',
    END,
  ].join('\n');
}

/** The seed whose profiles the docs show (bench/polling.ts uses it too). */
export const DOC_DURATION_SEED = 1;
const DURATIONS_START = '<!-- sandbox-durations:start -->';
const DURATIONS_END = '<!-- sandbox-durations:end -->';

/** The markdown block of the payers' duration profiles for DOC_DURATION_SEED. */
export function durationBlock(): string {
  const seconds = (ms: number) => (ms / 1000).toFixed(1);
  const rows = Object.keys(PAYERS).map((payer) => {
    const p = payerProfile(DOC_DURATION_SEED, payer);
    return `| ${payer} | ${seconds(p.queueMs)} | ${seconds(p.navigateMs)} | ${seconds(p.extractMs)} | ${p.sigma} |`;
  });
  return [
    DURATIONS_START,
    '',
    '| payer | IN_QUEUE (s) | NAVIGATING_WEBSITE (s) | EXTRACTING_DATA (s) | sigma |',
    '| --- | --- | --- | --- | --- |',
    ...rows,
    '',
    DURATIONS_END,
  ].join('\n');
}

/** `doc` with the text between two markers replaced by `block` (unchanged when absent). */
function replaceBlock(doc: string, start: string, end: string, block: string): string {
  const from = doc.indexOf(start);
  const to = doc.indexOf(end);
  return from >= 0 && to > from ? doc.slice(0, from) + block + doc.slice(to + end.length) : doc;
}

/** The document's text with the blocks replaced (or the scenarios inserted at the old single marker). */
export function renderSandboxDoc(doc: string): string {
  const withDurations = replaceBlock(doc, DURATIONS_START, DURATIONS_END, durationBlock());
  if (withDurations.includes(START)) return replaceBlock(withDurations, START, END, scenarioBlock());
  return withDurations.replace('<!-- sandbox-scenarios -->', scenarioBlock());
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(SANDBOX_DOC, renderSandboxDoc(readFileSync(SANDBOX_DOC, 'utf8')));
}
