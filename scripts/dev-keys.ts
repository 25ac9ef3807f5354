import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { newSecretKey } from '../services/secrets';

/**
 * A development key (for secrets at rest, or for Temporal's payloads), made on first start into the data folder,
 * readable by its owner only; the same key on every later start, so what was sealed stays readable.
 */
export function devKey(
  dataDir: string,
  name: string,
  setting: string,
  what: string,
  log: (line: string) => void = (line) => console.log(line),
): { key: string; where: string } {
  const file = path.join(dataDir, name);
  if (!existsSync(file)) {
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(file, `${newSecretKey('dev')}\n`, { mode: 0o600 });
    log(`keel: generated a development key for ${what} into ${file}`);
  }
  return { key: readFileSync(file, 'utf8').trim(), where: `${file} (development; set ${setting} in production)` };
}
