/**
 * Adapter-side failures (mappings/adapter-errors.json), loaded and checked once: the one reader
 * of that table, for the answers (`adapterError`, `findAdapterError`) and for the outcome
 * CodeSystem published by src/mapping/conformance/resources.ts (`allAdapterErrors`).
 */
import { z } from 'zod';
import { loadMappingTable } from '../mapping-table.js';

const tableSchema = z.object({
  errors: z
    .array(
      z.object({
        code: z.string().min(1),
        httpStatus: z.number().int().min(400).max(599),
        issueCode: z.string().min(1),
        text: z.string().min(1),
      }),
    )
    .min(1),
});

export type AdapterErrorCode =
  | 'ambiguous-create'
  | 'upstream-rejected'
  | 'upstream-unreachable'
  | 'credentials-guard'
  | 'backoff-guard'
  | 'task-lost'
  | 'unreadable-result'
  | 'abandoned';

export type AdapterError = z.infer<typeof tableSchema>['errors'][number];

const table = loadMappingTable('adapter-errors.json', tableSchema);
const byCode = new Map(table.errors.map((e) => [e.code, e]));

/** The table row of an adapter error code; throws at start-up if the table lacks one. */
export function adapterError(code: AdapterErrorCode): AdapterError {
  const row = byCode.get(code);
  if (!row) throw new Error(`mappings/adapter-errors.json has no row for ${code}`);
  return row;
}

/** Every row, in table order. */
export function allAdapterErrors(): readonly AdapterError[] {
  return table.errors;
}

/** The row for a code read back from a stored CER, if it is an adapter error. */
export function findAdapterError(code: string | undefined): AdapterError | undefined {
  return code === undefined ? undefined : byCode.get(code);
}
