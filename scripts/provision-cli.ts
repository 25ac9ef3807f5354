import { ensureGoTool } from './go-tools';
import { ensureTemporalCli } from './temporal-cli';
import { TEMPORAL_SERVER } from './temporal-server';

// `npm run provision [-- --cluster]`: prints the Temporal CLI's path (and with --cluster the Temporal server's, for
// `npm run cluster` and `npm run test:cluster`), building each first when it is missing.
try {
  console.log(ensureTemporalCli());
  if (process.argv.includes('--cluster')) console.log(ensureGoTool(TEMPORAL_SERVER, (line) => console.error(line)));
} catch (err) {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
}
