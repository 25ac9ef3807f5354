import { z } from 'zod';
import { storableString } from './text';

const Name = z.string().regex(/^[A-Za-z][A-Za-z0-9_]{0,63}$/, 'a letter, then letters, digits or _ (at most 64)');

/** An app's definition: its tables and their columns (records are JSON objects with those columns and an id). */
export const AppDefinition = z
  .object({
    name: storableString().min(1).max(200),
    tables: z
      .array(z.object({ name: Name, columns: z.array(Name).max(100) }).strict())
      .max(50)
      .refine((ts) => new Set(ts.map((t) => t.name.toLowerCase())).size === ts.length, 'table names must be unique'),
  })
  .strict();
export type AppDefinition = z.infer<typeof AppDefinition>;

export const RecordId = z.string().regex(/^[A-Za-z0-9._:-]{1,128}$/, '1–128 characters of [A-Za-z0-9._:-]');

/** The fields of a record that are not columns of its table (`id` is always allowed). */
export function unknownFields(record: Record<string, unknown>, columns: readonly string[]): string[] {
  const known = new Set([...columns, 'id']);
  return Object.keys(record).filter((k) => !known.has(k));
}
