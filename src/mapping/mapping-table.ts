/**
 * Reads one table of mappings/ and checks it with its zod schema, once at module load. A broken
 * table stops start-up with an error naming the file and every bad element (main.ts prints it
 * as one line, no stack).
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';

const MAPPINGS = new URL('../../mappings/', import.meta.url);

export function loadMappingTable<S extends z.ZodType>(file: string, schema: S): z.output<S> {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(new URL(file, MAPPINGS), 'utf8'));
  } catch (error) {
    throw new Error(`mappings/${file} cannot be read as JSON: ${(error as Error).message}`);
  }
  const parsed = schema.safeParse(json);
  if (!parsed.success) throw new Error(`mappings/${file} is invalid:\n${z.prettifyError(parsed.error)}`);
  return parsed.data;
}
