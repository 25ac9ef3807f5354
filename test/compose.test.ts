/**
 * docker-compose.temporal.yml is never run where Keel is developed (no Docker engine): this keeps it in step with what
 * is run, `npm run cluster` (scripts/cluster-stack.ts, deploy/temporal/) and Keel's own configuration.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { CONFIG_NAMES } from '../domain/config';
import { ALL_SEARCH_ATTRIBUTES } from '../domain/search-attributes';
import { REPO_ROOT } from '../scripts/processes';
import { TEMPORAL_SERVER_VERSION, TEMPORAL_UI_VERSION } from '../scripts/temporal-server';

interface Service {
  image?: string;
  environment?: Record<string, string> | string[];
  command?: string[];
}
interface Compose {
  services: Record<string, Service>;
  configs: Record<string, { content: string }>;
  'x-keel-env': Record<string, string>;
}

const read = (file: string) => readFileSync(path.join(REPO_ROOT, file), 'utf8');
const compose = parse(read('docker-compose.temporal.yml'), { merge: true }) as Compose;

/** A service's environment as name → value, whichever of Compose's two forms it is written in. */
function envOf(s: Service): Record<string, string> {
  const e = s.environment ?? {};
  if (!Array.isArray(e)) return e;
  return Object.fromEntries(e.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
}

/** The version a `${VAR:-default}` image tag falls back to. */
const tagOf = (image: string | undefined) => /:\$\{[A-Z_]+:-([^}]+)\}$/.exec(image ?? '')?.[1] ?? image?.split(':')[1];

describe('docker-compose.temporal.yml against what npm run cluster runs', () => {
  it('sets only KEEL_* variables Keel’s configuration knows', () => {
    const names = Object.values(compose.services).flatMap((s) => Object.keys(envOf(s)));
    const keel = [...new Set(names.filter((n) => n.startsWith('KEEL_')))];
    expect(keel.length).toBeGreaterThan(5);
    expect(keel.filter((n) => !CONFIG_NAMES.includes(n))).toEqual([]);
  });

  it('runs the server, admin tools and UI at the versions the scripts build', () => {
    const { temporal, 'temporal-admin-tools': tools, 'temporal-create-namespace': ns } = compose.services;
    expect(tagOf(temporal?.image)).toBe(TEMPORAL_SERVER_VERSION);
    expect(tagOf(tools?.image)).toBe(TEMPORAL_SERVER_VERSION);
    expect(tagOf(ns?.image)).toBe(TEMPORAL_SERVER_VERSION);
    expect(tagOf(compose.services['temporal-ui']?.image)).toBe(TEMPORAL_UI_VERSION);
  });

  it('registers every search attribute Keel defines, as Keyword', () => {
    const script = compose.services['temporal-create-namespace']?.command?.join('\n') ?? '';
    const listed = /for SA in ([A-Za-z ]+);/.exec(script)?.[1]?.trim().split(/\s+/) ?? [];
    expect(listed.sort()).toEqual(ALL_SEARCH_ATTRIBUTES.map((sa) => sa.name).sort());
    expect(script).toContain('--type Keyword');
  });

  it('has the same dynamic config, shards and persistence as deploy/temporal', () => {
    const inline = parse(compose.configs['temporal-dynamicconfig']!.content) as unknown;
    expect(inline).toEqual(parse(read('deploy/temporal/dynamicconfig.yaml')));
    const server = envOf(compose.services.temporal!);
    const config = read('deploy/temporal/keel-postgres.yaml');
    const shards = /numHistoryShards: \{\{ env "TEMPORAL_NUM_HISTORY_SHARDS" \| default "(\d+)" \}\}/.exec(config)?.[1];
    expect(server.NUM_HISTORY_SHARDS).toBe(shards);
    expect(server.DB).toBe('postgres12');
    expect(config.match(/pluginName: "([^"]+)"/g)).toEqual(['pluginName: "postgres12"', 'pluginName: "postgres12"']);
  });
});
