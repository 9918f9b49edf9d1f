/**
 * Renders the sandbox scenario table (src/sandbox/scenarios.ts) into docs/sandbox.md
 * between the `sandbox-scenarios` markers, so the docs cannot drift from what the sandbox does.
 *   npm run docs:sandbox            rewrite docs/sandbox.md
 * test/unit/readme.test.ts fails when docs/sandbox.md is out of date.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DEFAULT_SCENARIO, DEFAULT_SEARCH_ALL_SCENARIO, SCENARIOS } from '../src/sandbox/scenarios.js';

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

/** The document's text with the block replaced (or inserted at the old single marker). */
export function renderSandboxDoc(doc: string): string {
  const start = doc.indexOf(START);
  const end = doc.indexOf(END);
  if (start >= 0 && end > start) return doc.slice(0, start) + scenarioBlock() + doc.slice(end + END.length);
  return doc.replace('<!-- sandbox-scenarios -->', scenarioBlock());
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  writeFileSync(SANDBOX_DOC, renderSandboxDoc(readFileSync(SANDBOX_DOC, 'utf8')));
}
