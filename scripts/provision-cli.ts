import { ensureGoTool } from './go-tools';
import { describeTemporalCli, ensureTemporalCli } from './temporal-cli';
import { TEMPORAL_SERVER } from './temporal-server';

// `npm run provision [-- --cluster]`: prints the Temporal CLI's path (and with --cluster the Temporal server's, for
// `npm run cluster` and `npm run test:cluster`), getting each first when it is missing: the CLI as `npm start` does
// (the SDK's download, else a Go build), the server with Go. How it got them goes to stderr, the paths to stdout.
async function main(): Promise<void> {
  const cli = await ensureTemporalCli();
  console.error(`keel: the Temporal CLI: ${describeTemporalCli(cli)}`);
  console.log(cli.path);
  if (process.argv.includes('--cluster')) console.log(ensureGoTool(TEMPORAL_SERVER, (line) => console.error(line)));
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
