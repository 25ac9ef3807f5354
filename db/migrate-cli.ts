import { loadConfig } from '../domain/config';
import { migrate } from './migrate';

async function main(): Promise<void> {
  const { databaseUrl } = loadConfig(process.env);
  if (!databaseUrl) throw new Error('DATABASE_URL is not set (npm start sets it for the embedded PostgreSQL)');
  await migrate(databaseUrl, (m) => console.log(m));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
