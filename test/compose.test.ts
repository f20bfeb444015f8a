/**
 * The docker-compose stack, checked without a Docker engine: docker-compose.yml against the
 * Compose Specification's JSON schema (the copy the `dclint` package ships), every file it mounts
 * or builds from present in the repo, the file accepted by Compose v1 (1.29) as well, and the wiring
 * between compose, Dockerfile, prometheus/ (configuration and alert rules) and Grafana's
 * provisioning consistent.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parseDocument } from 'yaml';
import { binary, hasBinary } from './support/programs.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');

/** Parses YAML the way Compose does (merge keys `<<:` resolved); throws on any YAML error. */
function parseYaml(text: string): unknown {
  const doc = parseDocument(text, { merge: true, prettyErrors: true });
  const [error] = doc.errors;
  if (error) throw error;
  return doc.toJS();
}

type Healthcheck = { test?: string[] | string; disable?: boolean };
type Service = {
  image?: string;
  build?: string | { context?: string; dockerfile?: string; target?: string };
  profiles?: string[];
  read_only?: boolean;
  security_opt?: string[];
  mem_limit?: string;
  pids_limit?: number;
  logging?: { driver?: string; options?: Record<string, string> };
  command?: string[] | string;
  environment?: Record<string, string>;
  volumes?: Array<string | { type?: string; source?: string; target?: string }>;
  ports?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: Healthcheck;
  expose?: string[];
};
type Compose = { services: Record<string, Service>; volumes?: Record<string, unknown> };

const composeText = read('docker-compose.yml');
const envExampleText = read('.env.example');
/** The values .env.example sets (lines `NAME=value`, comments left out). */
const envExample: Record<string, string> = Object.fromEntries(
  [...envExampleText.matchAll(/^([A-Z][A-Z0-9_]+)=(.*)$/gm)].map((m): [string, string] => [
    m[1] ?? '',
    m[2] ?? '',
  ]),
);
/** The values Compose refuses to start without (`${VAR:?...}`), set for the checks that run it. */
const REQUIRED: Record<string, string> = {
  REDIS_PASSWORD: 'a-test-password',
  GRAFANA_ADMIN_PASSWORD: 'another-test-password',
  RPC_URL: 'http://rpc-sim:8899',
};
const compose = parseYaml(composeText) as Compose;
const services = compose.services;
const service = (name: string): Service => {
  const s = services[name];
  if (!s) throw new Error(`docker-compose.yml has no service ${name}`);
  return s;
};

/**
 * The Compose Specification schema (draft-07), as vendored by the dclint package. Its `$schema`
 * spells the draft-07 meta-schema as `https://...` without `#`, an id Ajv does not know; Ajv's
 * default is draft-07 anyway, so the key is dropped.
 */
function composeSchema(): object {
  const require = createRequire(import.meta.url);
  const dir = dirname(require.resolve('dclint/package.json'));
  const schema = JSON.parse(readFileSync(join(dir, 'schemas/compose.schema.json'), 'utf8')) as {
    $schema?: string;
    title?: string;
  };
  expect(schema.$schema).toMatch(/draft-07/);
  expect(schema.title).toBe('Compose Specification');
  delete schema.$schema;
  return schema;
}
const ajv = new Ajv({ allErrors: true, strictSchema: false, allowUnionTypes: true });
const validateCompose = ajv.compile(composeSchema());

/** Bind mounts of a service: [host path, container path]; named volumes excluded. */
function bindMounts(s: Service): Array<[string, string]> {
  return (s.volumes ?? []).flatMap((v): Array<[string, string]> => {
    if (typeof v === 'string') {
      const [source = '', target = ''] = v.split(':');
      return /^[./~]/.test(source) ? [[source, target]] : [];
    }
    return v.type === 'bind' && v.source && v.target ? [[v.source, v.target]] : [];
  });
}

describe('docker-compose.yml', () => {
  it('is valid against the Compose Specification schema', () => {
    const ok = validateCompose(compose);
    expect(validateCompose.errors ?? [], JSON.stringify(validateCompose.errors, null, 2)).toEqual(
      [],
    );
    expect(ok).toBe(true);
  });

  it('is a file Compose v1 (1.29) accepts: only the top-level keys its schema knows', () => {
    // docker-compose 1.29 validates against its own copy of the specification, older than the
    // dclint one: no top-level `name:` (the project is named after the directory).
    const v1 = new Set(['version', 'services', 'networks', 'volumes', 'secrets', 'configs']);
    const unknown = Object.keys(compose).filter((k) => !v1.has(k) && !k.startsWith('x-'));
    expect(unknown).toEqual([]);
    // Healthcheck keys of 1.29 (no start_interval), on every service.
    const keys = new Set(['test', 'interval', 'timeout', 'retries', 'start_period', 'disable']);
    for (const [name, s] of Object.entries(services)) {
      const extra = Object.keys(s.healthcheck ?? {}).filter((k) => !keys.has(k));
      expect(extra, name).toEqual([]);
    }
  });

  const compose1 = hasBinary('docker-compose')
    ? spawnSync(binary('docker-compose'), ['version', '--short'], { encoding: 'utf8' }).stdout
    : '';
  /** An empty env file: a developer's .env is not read. */
  const noEnvFile = join(mkdtempSync(join(tmpdir(), 'sns-compose-')), 'empty.env');
  writeFileSync(noEnvFile, '');
  /** `docker-compose config -q` with `env` only (no .env file of a developer's read). */
  const composeConfig = (env: Record<string, string>) =>
    spawnSync(
      binary('docker-compose'),
      ['-f', 'docker-compose.yml', '--env-file', noEnvFile, '--profile', 'demo', 'config', '-q'],
      { cwd: root, encoding: 'utf8', timeout: 60_000, env: { PATH: process.env.PATH, ...env } },
    );
  it.runIf(/^1\./.test(compose1))('passes `docker-compose config` of Compose v1', () => {
    // Reads and validates the file only: no Docker engine is asked anything.
    const run = composeConfig(REQUIRED);
    expect(run.status, run.stdout + run.stderr).toBe(0);
  });
  it.runIf(/^1\./.test(compose1))(
    'is refused by Compose without each required value: no default password',
    () => {
      for (const name of Object.keys(REQUIRED)) {
        const run = composeConfig({ ...REQUIRED, [name]: '' });
        expect(run.status, name).not.toBe(0);
        expect(run.stderr, name).toContain(`set ${name}`);
      }
    },
  );
  if (!/^1\./.test(compose1)) {
    console.warn('compose.test: docker-compose v1 not installed; skipping its `config` check');
  }

  it('the schema check has teeth: it refuses what Compose refuses', () => {
    const broken = structuredClone(compose);
    (broken.services.api as Service).depends_on = { redis: { condition: 'service_ready' } };
    expect(validateCompose(broken)).toBe(false);
    const typo = structuredClone(compose);
    (typo.services.worker as Record<string, unknown>).healthchek = { test: ['CMD', 'true'] };
    expect(validateCompose(typo)).toBe(false);
  });

  it("has the five services and the demo profile's simulator, and every file or folder it mounts or builds from exists", () => {
    expect(Object.keys(services).sort()).toEqual([
      'api',
      'grafana',
      'prometheus',
      'redis',
      'rpc-sim',
      'worker',
    ]);
    const missing: string[] = [];
    for (const [name, s] of Object.entries(services)) {
      if (s.build !== undefined) {
        const context = typeof s.build === 'string' ? s.build : (s.build.context ?? '.');
        const dockerfile =
          typeof s.build === 'string' ? 'Dockerfile' : (s.build.dockerfile ?? 'Dockerfile');
        if (!existsSync(join(root, context))) missing.push(`${name}: build context ${context}`);
        if (!existsSync(join(root, context, dockerfile))) missing.push(`${name}: ${dockerfile}`);
      }
      for (const [source] of bindMounts(s)) {
        if (!existsSync(join(root, source))) missing.push(`${name}: ${source}`);
      }
    }
    expect(missing).toEqual([]);
  });

  it('runs Redis as BullMQ needs it, on a persistent volume, with a health check', () => {
    const redis = service('redis');
    expect(redis.image).toBe('redis:7-alpine');
    const command = Array.isArray(redis.command) ? redis.command.join(' ') : (redis.command ?? '');
    expect(command).toMatch(/--appendonly yes/);
    expect(command).toMatch(/--maxmemory-policy noeviction/);
    // A password, from the environment, never a default one.
    expect(command).toMatch(/--requirepass \$\{REDIS_PASSWORD:\?[^}]+\}/);
    expect(redis.ports).toBeUndefined();
    const named = (redis.volumes ?? []).map((v) =>
      typeof v === 'string' ? v.split(':')[0] : v.source,
    );
    expect(named.some((v) => v !== undefined && compose.volumes && v in compose.volumes)).toBe(
      true,
    );
    // Healthy on PONG only: `redis-cli ping` exits 0 on NOAUTH too.
    expect(JSON.stringify(redis.healthcheck?.test)).toMatch(/redis-cli.*ping.*PONG/);
    expect(redis.environment?.REDISCLI_AUTH).toMatch(/^\$\{REDIS_PASSWORD:\?/);
  });

  it('builds api and worker from the one Dockerfile with their ROLE and RPC_URL from the environment', () => {
    for (const [name, role] of [
      ['api', 'api'],
      ['worker', 'worker'],
    ] as const) {
      const s = service(name);
      expect(s.build).toMatchObject({ context: '.', dockerfile: 'Dockerfile' });
      expect(s.environment?.ROLE).toBe(role);
      expect(s.environment?.RPC_URL).toMatch(/^\$\{RPC_URL:\?[^}]+\}$/);
      expect(s.environment?.REDIS_URL).toMatch(
        /^redis:\/\/:\$\{REDIS_PASSWORD:\?[^}]+\}@redis:6379$/,
      );
      expect(s.depends_on?.redis).toEqual({ condition: 'service_healthy' });
      // Healthy means ready (Redis answers; the worker takes jobs), not merely alive, so
      // depends_on waits for a stack that works; bounded so a stalled answer is a failure.
      const test = JSON.stringify(s.healthcheck?.test);
      expect(test).toMatch(/node.*\/readyz/);
      expect(test).not.toMatch(/healthz/);
      expect(test).toMatch(/AbortSignal\.timeout\(\d+\)/);
    }
    // Published on 3000 unless API_PUBLISH says otherwise (test/stack.test.ts: a port of its own).
    expect(service('api').ports).toContain('${API_PUBLISH:-3000}:3000');
    expect(service('worker').environment?.WORKER_METRICS_PORT).toBe('9101');
  });

  it('waits on health: every depends_on is service_healthy on a service with a health check', () => {
    const problems: string[] = [];
    for (const [name, s] of Object.entries(services)) {
      for (const [dep, { condition }] of Object.entries(s.depends_on ?? {})) {
        if (condition !== 'service_healthy') problems.push(`${name} -> ${dep}: ${condition}`);
        const target = services[dep];
        if (!target?.healthcheck?.test || target.healthcheck.disable) {
          problems.push(`${dep} has no health check`);
        }
      }
    }
    expect(problems).toEqual([]);
    expect(Object.keys(service('prometheus').depends_on ?? {}).sort()).toEqual(['api', 'worker']);
    expect(Object.keys(service('grafana').depends_on ?? {})).toEqual(['prometheus']);
  });

  it('wires Prometheus and Grafana to the files that configure them', () => {
    const prometheus = service('prometheus');
    expect(prometheus.image).toMatch(/^prom\/prometheus(:|$)/);
    expect(bindMounts(prometheus)).toContainEqual([
      './prometheus/prometheus.yml',
      '/etc/prometheus/prometheus.yml',
    ]);
    // The rules file sits beside the configuration in the container as in the repository:
    // rule_files is relative to the configuration file.
    expect(bindMounts(prometheus)).toContainEqual([
      './prometheus/alerts.yml',
      '/etc/prometheus/alerts.yml',
    ]);
    expect(prometheus.ports).toContain('${PROMETHEUS_PUBLISH:-127.0.0.1:9090}:9090');

    const grafana = service('grafana');
    expect(grafana.image).toMatch(/^grafana\/grafana(:|$)/);
    const mounts = bindMounts(grafana);
    expect(mounts).toContainEqual(['./grafana/provisioning', '/etc/grafana/provisioning']);
    const provider = parseYaml(read('grafana/provisioning/dashboards/provider.yml')) as {
      providers: Array<{ type: string; options: { path: string } }>;
    };
    const path = provider.providers[0]?.options.path;
    expect(provider.providers[0]?.type).toBe('file');
    expect(mounts).toContainEqual(['./grafana/dashboards', path]);
    const datasource = parseYaml(read('grafana/provisioning/datasources/prometheus.yml')) as {
      datasources: Array<{ uid: string; url: string }>;
    };
    expect(datasource.datasources[0]).toMatchObject({
      uid: 'prometheus',
      url: 'http://prometheus:9090',
    });
    const env = grafana.environment ?? {};
    // No anonymous access unless asked for, and then as Viewer; no default admin password.
    expect(env.GF_AUTH_ANONYMOUS_ENABLED).toBe('${GRAFANA_ANONYMOUS:-false}');
    expect(env.GF_AUTH_ANONYMOUS_ORG_ROLE).toBe('Viewer');
    expect(env.GF_SECURITY_ADMIN_PASSWORD).toMatch(/^\$\{GRAFANA_ADMIN_PASSWORD:\?[^}]+\}$/);
    expect(grafana.ports).toContain('${GRAFANA_PUBLISH:-127.0.0.1:3001}:3000');
  });

  it('is safe by default: only the API on every interface, and every container hardened', () => {
    const problems: string[] = [];
    for (const [name, s] of Object.entries(services)) {
      for (const port of s.ports ?? []) {
        // `${VAR:-default}:target`, or a literal: what is published when nothing is set.
        const published = port.replace(/\$\{\w+:-([^}]*)\}/g, '$1').replace(/:\d+$/, '');
        const loopback = /^127\.0\.0\.1:\d+$/.test(published);
        if (name !== 'api' && !loopback) problems.push(`${name} published on ${published}`);
      }
      const logOptions = s.logging?.options ?? {};
      if (s.logging?.driver !== 'json-file' || !logOptions['max-size'] || !logOptions['max-file']) {
        problems.push(`${name}: no log rotation`);
      }
      if (!s.security_opt?.includes('no-new-privileges:true')) {
        problems.push(`${name}: no no-new-privileges`);
      }
      if (!s.mem_limit || !s.pids_limit) problems.push(`${name}: no memory or process limit`);
      // Grafana's image is the one no test here can run (no registry, no Debian package).
      if (name !== 'grafana' && s.read_only !== true) problems.push(`${name}: root not read-only`);
    }
    expect(problems).toEqual([]);
    expect(service('api').ports).toEqual(['${API_PUBLISH:-3000}:3000']);
    // The queue UI is read-only unless the operator asks otherwise.
    expect(service('api').environment?.ADMIN_QUEUES_WRITE).toBe('${ADMIN_QUEUES_WRITE:-false}');
  });

  it('runs the simulated chain under the demo profile, at the RPC_URL .env.example gives', () => {
    const sim = service('rpc-sim');
    expect(sim.profiles).toEqual(['demo']);
    expect(sim.build).toMatchObject({ context: '.', dockerfile: 'Dockerfile', target: 'rpc-sim' });
    expect(readFileSync(join(root, 'Dockerfile'), 'utf8')).toMatch(/^FROM build AS rpc-sim$/m);
    expect(sim.expose).toEqual(['8899', '8900']);
    expect(sim.ports).toBeUndefined();
    expect(envExample.RPC_URL).toBe('http://rpc-sim:8899');
    expect(envExample.HOT_KEYS_MIN_CLIENTS).toBe('1');
    // The node's health route, not a JSON-RPC call: those advance the slot and meet faults.
    expect(JSON.stringify(sim.healthcheck?.test)).toMatch(/127\.0\.0\.1:8899\/health'/);
    expect(JSON.stringify(sim.healthcheck?.test)).not.toMatch(/getHealth|POST/);
  });

  it('has every variable it reads in .env.example, the required ones left to fill in', () => {
    const read = new Set([...composeText.matchAll(/\$\{(\w+)(?::[-?][^}]*)?\}/g)].map((m) => m[1]));
    const documented = new Set(
      [...envExampleText.matchAll(/^#? ?([A-Z][A-Z0-9_]+)=/gm)].map((m) => m[1]),
    );
    // The test-only values of test/stack.test.ts are not the user's.
    const missing = [...read].filter((v) => v !== undefined && !documented.has(v));
    expect(missing).toEqual([]);
    for (const name of ['REDIS_PASSWORD', 'GRAFANA_ADMIN_PASSWORD']) {
      expect(composeText).toContain(`\${${name}:?`);
      expect(envExample[name], name).toBe('');
    }
    expect(composeText).toContain('${RPC_URL:?');
  });
});

describe('prometheus/prometheus.yml', () => {
  type PromConfig = {
    scrape_configs: Array<{
      job_name: string;
      metrics_path?: string;
      static_configs: Array<{ targets: string[] }>;
    }>;
  };
  const config = parseYaml(read('prometheus/prometheus.yml')) as PromConfig;

  it('scrapes api:9100/metrics and worker:9101/metrics, the ports the services listen on', () => {
    const targets = config.scrape_configs.flatMap((job) =>
      job.static_configs.flatMap((c) =>
        c.targets.map((t) => `${t}${job.metrics_path ?? '/metrics'}`),
      ),
    );
    expect(targets.sort()).toEqual(['api:9100/metrics', 'worker:9101/metrics']);
    expect(service('api').environment?.API_METRICS_PORT).toBe('9100');
    expect(service('worker').environment?.WORKER_METRICS_PORT).toBe('9101');
  });

  it.runIf(hasBinary('promtool'))('passes promtool check config', () => {
    const run = spawnSync(
      binary('promtool'),
      ['check', 'config', join(root, 'prometheus/prometheus.yml')],
      {
        encoding: 'utf8',
      },
    );
    expect(run.status, run.stdout + run.stderr).toBe(0);
  });
  if (!hasBinary('promtool'))
    console.warn('compose.test: promtool not installed; skipping `promtool check config`');
});

describe('Dockerfile and .dockerignore', () => {
  const dockerfile = read('Dockerfile');
  const stages = dockerfile.split(/^FROM /m).slice(1);

  it('builds in one stage and runs in a slim, non-root one', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    const build = stages[0] ?? '';
    const runtime = stages[stages.length - 1] ?? '';
    expect(build).toMatch(/RUN npm ci\b/);
    expect(build).toMatch(/RUN npm run build\b/);
    // The image's Node release is pinned once (ARG NODE_IMAGE; test/node-version.test.ts).
    expect(runtime).toMatch(/^\$\{NODE_IMAGE\} AS runtime\b/);
    expect(runtime).toMatch(/RUN npm ci --omit=dev\b/);
    expect(runtime).toMatch(/COPY --from=\w+ \/app\/dist \.\/dist/);
    expect(runtime).toMatch(/^USER node$/m);
    // Files the app reads at run time, next to dist/ (the home page, src/api/http/routes/home.ts).
    expect(runtime).toMatch(/^COPY public \.\/public$/m);
    expect(runtime).toMatch(/^CMD \["node", "dist\/main\.js"\]$/m);
    // The entry the image runs is what `npm run build` emits for main.ts.
    const build_ = JSON.parse(read('tsconfig.build.json')) as { include: string[] };
    expect(build_.include).toEqual(expect.arrayContaining(['main.ts', 'src']));
    expect(existsSync(join(root, 'main.ts'))).toBe(true);
    for (const copied of runtime.concat(build).matchAll(/^COPY (?!--from)(.+) \S+$/gm)) {
      for (const source of (copied[1] ?? '').split(/\s+/)) {
        expect(existsSync(join(root, source)), `COPY ${source}`).toBe(true);
      }
    }
  });

  it('checks health against /readyz with node, not curl', () => {
    const healthcheck = /^HEALTHCHECK (?:.*\\\n)*.*$/m.exec(dockerfile)?.[0] ?? '';
    expect(healthcheck).toMatch(/CMD \["node", "-e"/);
    expect(healthcheck).toMatch(/\/readyz/);
    expect(healthcheck).not.toMatch(/\/healthz/);
    expect(healthcheck).not.toMatch(/curl|wget/);
  });

  it('keeps the build context small without dropping what the build copies', () => {
    const ignored = read('.dockerignore')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l !== '' && !l.startsWith('#'));
    for (const must of ['node_modules', 'dist', '.git']) expect(ignored).toContain(must);
    for (const needed of [
      'src',
      'worker',
      'public',
      'package.json',
      'package-lock.json',
      'tsconfig.json',
    ]) {
      expect(ignored, needed).not.toContain(needed);
    }
    expect(ignored.filter((p) => p.startsWith('!'))).toEqual([]);
  });
});
