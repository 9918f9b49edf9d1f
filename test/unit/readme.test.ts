/** The README's sandbox scenario table is generated from the sandbox's own table. */
import { readFileSync } from 'node:fs';
import { format, resolveConfig } from 'prettier';
import { describe, expect, it } from 'vitest';
import { README, renderReadme } from '../../scripts/sandbox-table.js';

describe('README', () => {
  it('lists every sandbox scenario as the sandbox defines it (npm run docs:sandbox updates it)', async () => {
    const readme = readFileSync(README, 'utf8');
    const rendered = await format(renderReadme(readme), {
      ...(await resolveConfig(README)),
      filepath: README,
    });
    expect(rendered).toBe(readme);
  });
});
