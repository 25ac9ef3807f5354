import { ensureTemporalCli } from './temporal-cli';

// `npm run provision`: prints the Temporal CLI's path, building it first when it is missing.
try {
  console.log(ensureTemporalCli());
} catch (err) {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
}
