// @ts-check
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';
import reactHooks from 'eslint-plugin-react-hooks';
import { builtinModules } from 'node:module';

/** Domain modules that build zod schemas or rule tables when loaded: workflows import their types only. */
const SCHEMA_MODULES = [
  'apps',
  'config',
  'cron',
  'delegation',
  'delivery',
  'jobs',
  'messages',
  'rate-limits',
  'reflection',
  'reply-guard',
  'routines',
  'secret-scan',
  'spend',
  'text',
  'tools',
];

/**
 * Workflow code is thin (issue 27): the SDK evaluates a bundle's imported modules once per cached workflow, so a
 * schema or rule table a workflow imports is built again in every conversation. test/layers.test.ts checks the same,
 * transitively.
 */
const THIN_WORKFLOWS =
  'Workflows hold no schema or rule table (issue 27): check data in the activity it comes from, and import the ' +
  "rules' schema-free module (e.g. domain/tool-names, domain/job-runs); types may be imported.";

const nodeBuiltins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];

// Keel's layers (docs/design.md): contracts ← workflows, activities, services ← api, worker; adapters (outside
// systems) under activities and services; domain under all of them. Keel imports its own code by relative path and
// a restricted-import pattern sees the specifier as written, so a file `depth` folders below the repository root
// reaches the top-level folder X as `../` × depth, then X. Each layer's rules are therefore stated once and applied
// at every depth up to MAX_DEPTH (layer/x.ts is depth 1, layer/a/x.ts depth 2).
const MAX_DEPTH = 5;
const folders = (names) => `(${names.join('|')})(/|$)`;
/** Relative imports that land in one of `names`. */
const into = (names) => folders(names);
/** Relative imports that land anywhere (a top-level folder or file) except in one of `names`. */
const outside = (names) => `(?!${folders(names)})`;

/**
 * @param {string} layer top-level folder the rules apply to
 * @param {{ to: string, message: string, allowTypeImports?: boolean }[]} rules relative-import restrictions
 * @param {{ regex: string, message: string, allowTypeImports?: boolean }[]} [packages] restrictions on package imports
 *   (depth-independent)
 */
function layerRules(layer, rules, packages = []) {
  return Array.from({ length: MAX_DEPTH }, (_, i) => i + 1).map((depth) => ({
    files: [`${layer}/${'*/'.repeat(depth - 1)}*.ts`],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        {
          patterns: [
            ...rules.map(({ to, message, allowTypeImports = false }) => ({
              regex: `^(\\.\\./){${depth}}${to}`,
              caseSensitive: true,
              allowTypeImports,
              message,
            })),
            ...packages.map(({ regex, message, allowTypeImports = false }) => ({
              regex,
              caseSensitive: true,
              allowTypeImports,
              message,
            })),
          ],
        },
      ],
    },
  }));
}

export default tseslint.config(
  { ignores: ['node_modules/**', 'data/**', '.keel-test/**', 'console/dist/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      // fastify plugins and hooks are async by contract, with or without an await inside.
      '@typescript-eslint/require-await': 'off',
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      // Lines stay within 120 characters (Prettier's printWidth), comments, strings and test names included:
      // Prettier leaves those long, so this rule catches them.
      'max-len': ['error', { code: 120, ignoreUrls: true }],
    },
  },
  {
    // Workflow code is replayed inside Temporal's sandbox: no Node built-ins, no I/O libraries.
    files: ['workflows/**/*.ts', 'domain/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            ...nodeBuiltins,
            'pg',
            '@anthropic-ai/sdk',
            '@slack/web-api',
            'fastify',
            '@temporalio/activity',
            '@temporalio/client',
            '@temporalio/worker',
          ].map((name) => ({
            name,
            message: 'Workflows and domain rules are deterministic: no I/O or Node built-ins here.',
          })),
        },
      ],
    },
  },
  // Layer rules. Type-only imports are refused too unless a rule says otherwise: a type import is still a dependency
  // (and half of an import cycle), it is only erased at run time.
  ...layerRules(
    'workflows',
    [
      {
        to: into(['activities']),
        allowTypeImports: true,
        message:
          'Layer rule (workflows → activities): a workflow calls activities through proxyActivities, so it may use ' +
          'their types (`import type`) but never load activity code, which does I/O and would be bundled into the ' +
          'replayed, deterministic workflow sandbox.',
      },
      {
        to: 'activities/.',
        message:
          "Layer rule (workflows → activities): a workflow may use the type of Keel's activities (`KeelActivities` " +
          'from activities/) and nothing else of that folder. Payload types a workflow shares with its steps live in ' +
          'contracts/ or domain/.',
      },
      {
        to: outside(['contracts', 'domain', 'workflows', 'activities']),
        message:
          'Layer rule (workflows): workflows import only contracts/, domain/, their own folder and activity types. ' +
          'Anything else does I/O or pulls Node into the deterministic workflow bundle: share definitions through ' +
          'contracts/ and pure rules or types through domain/.',
      },
      {
        to: `domain/(${SCHEMA_MODULES.join('|')})$`,
        allowTypeImports: true,
        message: THIN_WORKFLOWS,
      },
    ],
    [
      { regex: '^(zod|croner)(/|$)', allowTypeImports: true, message: THIN_WORKFLOWS },
      { regex: '\\.json$', message: THIN_WORKFLOWS },
    ],
  ),
  ...layerRules('activities', [
    {
      to: into(['workflows']),
      message:
        'Layer rule (activities → workflows): activities never import workflows/. Signals, updates, queries, ' +
        'workflow type names and their payload types live in contracts/; an import of workflows/ here is the ' +
        'activities ↔ workflows import cycle.',
    },
  ]),
  ...layerRules('api', [
    {
      to: into(['workflows']),
      message:
        'Layer rule (api → workflows): the API never imports workflows/. It reaches workflows through contracts/ ' +
        '(names, signals, updates, queries, payload types) and services/.',
    },
    {
      to: into(['activities']),
      message:
        'Layer rule (api → activities): the API never imports activities/: that would load worker code ' +
        '(isolated-vm included) into the API process. What the API and activities both need lives in services/ ' +
        '(or domain/).',
    },
    {
      to: 'db/(?!(pool|migrate)$)',
      message:
        "Layer rule (api → db): routes go through services/, which own each table's rules and queries. The API " +
        'imports only db/pool (its Pool) and db/migrate (start-up) of db/.',
    },
    {
      to: into(['adapters']),
      message:
        'Layer rule (api → adapters): the API reaches outside systems (model providers, transports, the sandbox, ' +
        'the egress-guarded client) only through services/.',
    },
  ]),
  ...layerRules('adapters', [
    {
      to: outside(['adapters', 'domain']),
      message:
        'Layer rule (adapters): adapters/ hold each outside system behind a small interface and import only ' +
        'domain/ (its types and rules). What they need of PostgreSQL or Temporal is handed to them by the caller.',
    },
  ]),
  ...layerRules('domain', [
    {
      to: outside(['domain']),
      message:
        'Layer rule (domain): domain/ holds pure rules and types and imports nothing of Keel outside itself, so ' +
        'every layer (workflows and contracts included) can depend on it without a cycle or an I/O dependency.',
    },
  ]),
  ...layerRules('db', [
    {
      to: outside(['db', 'domain']),
      message:
        'Layer rule (db): db/ holds SQL and imports only domain/ (its types and rules), so every layer above can use ' +
        'it without a cycle.',
    },
  ]),
  ...layerRules('services', [
    {
      to: into(['workflows', 'activities', 'api', 'worker']),
      message:
        'Layer rule (services): services/ hold what the API and activities both do, below both: they reach ' +
        'workflows through contracts/ and never import workflows/, activities/, api/ or worker/.',
    },
  ]),
  ...layerRules(
    'contracts',
    [
      {
        to: outside(['contracts', 'domain']),
        message:
          'Layer rule (contracts): contracts/ imports only domain/ (and @temporalio/workflow). It is shared by ' +
          'workflows and their callers, so it must not depend on either side.',
      },
    ],
    [
      {
        regex: '^(?!\\.|@temporalio/workflow$)',
        message:
          'Layer rule (contracts): contracts/ imports only @temporalio/workflow (its define* helpers) and domain/. ' +
          'Contracts are bundled into the workflow sandbox and loaded by the API, so they carry no other dependency.',
      },
    ],
  ),
  {
    // The operator console runs in the browser (console/tsconfig.json): the browser's globals and React's rules of
    // hooks. The server's layer rules above name top-level folders the console is not one of.
    files: ['console/src/**/*.{ts,tsx}'],
    languageOptions: { globals: globals.browser },
    plugins: { 'react-hooks': reactHooks },
    rules: { 'react-hooks/rules-of-hooks': 'error', 'react-hooks/exhaustive-deps': 'error' },
  },
  {
    files: ['eslint.config.mjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    // The worker's preload (worker/workflow-thread.cjs) is CommonJS that Node loads before tsx: no types to check.
    files: ['**/*.cjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      sourceType: 'commonjs',
      globals: globals.node,
    },
    rules: { ...tseslint.configs.disableTypeChecked.rules, '@typescript-eslint/no-require-imports': 'off' },
  },
);
