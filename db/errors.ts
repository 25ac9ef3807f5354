/** PostgreSQL refused the data itself (SQLSTATE class 22, data exception): the same data will fail every retry. */
export function isDataError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' && code.startsWith('22');
}
