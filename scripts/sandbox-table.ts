/**
 * Renders the sandbox scenario table (src/upstream/sandbox/scenarios.ts) into README.md between
 * the `sandbox-scenarios` markers, so the README cannot drift from what the sandbox does.
 *   npm run docs:sandbox            rewrite README.md
 * test/unit/readme.test.ts fails when the README is out of date.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  DEFAULT_SCENARIO,
  DEFAULT_SEARCH_ALL_SCENARIO,
  SCENARIOS,
} from '../src/upstream/sandbox/scenarios.js';

export const README = fileURLToPath(new URL('../README.md', import.meta.url));
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
    '### Sandbox scenarios',
    '',
    'The built-in sandbox picks the upstream behaviour from the patient identifier (the seven-digit',
    'serial of an Emirates ID, or the last seven digits of a card number) and the payer code. Put the',
    'identifier in the example request above to try each one. Timings and fault injection: `docs/sandbox.md`.',
    '',
    '| identifier | payer | scenario | what you will see upstream |',
    '| --- | --- | --- | --- |',
    ...rows,
    '',
    END,
  ].join('\n');
}

/** README text with the block replaced (or inserted at the old single marker). */
export function renderReadme(readme: string): string {
  const start = readme.indexOf(START);
  const end = readme.indexOf(END);
  if (start >= 0 && end > start)
    return readme.slice(0, start) + scenarioBlock() + readme.slice(end + END.length);
  return readme.replace('<!-- sandbox-scenarios -->', scenarioBlock());
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(README, renderReadme(readFileSync(README, 'utf8')));
}
