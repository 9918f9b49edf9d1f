/** The sandbox scenario table of docs/sandbox.md is generated from the sandbox's own table. */
import { readFileSync } from 'node:fs';
import { format, resolveConfig } from 'prettier';
import { describe, expect, it } from 'vitest';
import { SANDBOX_DOC, renderSandboxDoc } from '../../scripts/sandbox-table.js';

describe('docs/sandbox.md', () => {
  it('lists every sandbox scenario as the sandbox defines it (npm run docs:sandbox updates it)', async () => {
    const doc = readFileSync(SANDBOX_DOC, 'utf8');
    const rendered = await format(renderSandboxDoc(doc), {
      ...(await resolveConfig(SANDBOX_DOC)),
      filepath: SANDBOX_DOC,
    });
    expect(rendered).toBe(doc);
  });
});
