import { defineConfig } from 'dpdm';

// The import-cycle check of `npm run lint` (dpdm): every TypeScript file of the repository, tests, scripts, bench and
// the console's React components (.tsx) included, must be free of import cycles.
//
// Type-only imports count. They are erased at run time, but a type cycle still ties two modules together (neither can
// be read or changed alone), and one `import type` that gains a value becomes a run-time cycle without another warning.
// dpdm's `transform` mode (which drops type-only edges) is also unsafe here: it parses .ts files as TSX, so a generic
// arrow function (`<T>(x: T) => …`) is read as JSX and imports the file really uses vanish from the graph.
export default defineConfig({
  files: ['*.{ts,mts,mjs}', '!(node_modules|data)/**/*.{ts,tsx,mts,mjs}'],
  transform: false,
  exitCode: 'circular:1',
  tree: false,
  circular: true,
  // Warnings name imports dpdm could not resolve, which would hide a cycle. Packages are not followed (dpdm's default
  // `exclude`), so their "skipped" notices are left out.
  warning: true,
  ignoreSkipWarnings: ['^node_modules/'],
  progress: false,
});
