import { z } from 'zod';

/**
 * A string PostgreSQL can store: U+0000 is refused here, at the edge, because the database rejects it and a
 * message that can never be written must be refused, not retried forever.
 */
export function storableString(): z.ZodString {
  return z.string().refine((s) => !s.includes('\u0000'), 'must not contain the NUL character (U+0000)');
}
