import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  configSchema,
  DEFAULT_RPC_CREDITS,
  loadConfig,
  redisUrlDatabase,
  type Config,
} from '../src/core/config.js';
import { createRedis, databaseOf } from '../src/core/redis.js';

describe('loadConfig', () => {
  it('applies the documented defaults and freezes the result', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      ROLE: 'all',
      PORT: 3000,
      HOST: '0.0.0.0',
      REDIS_URL: 'redis://127.0.0.1:6379',
      CACHE_FRESH_SECONDS: 60,
      CACHE_STALE_SECONDS: 86400,
      SUBDOMAINS_WAIT_MS: 15000,
      RPC_TIMEOUT_MS: 10000,
      RPC_MAX_PER_SECOND: 5,
      WORKER_CONCURRENCY: 4,
      QUEUE_PREFIX: 'sns',
      QUEUE_MAX_WAITING: 1000,
      WORKER_METRICS_PORT: 9101,
      LOG_LEVEL: 'info',
      RPC_OVERRIDE: 'on',
      RPC_OVERRIDE_ALLOWLIST: [],
    });
    expect(config.RPC_URL).toBeUndefined();
    expect(Object.isFrozen(config)).toBe(true);
    expect(Object.isFrozen(config.RPC_OVERRIDE_ALLOWLIST)).toBe(true);
  });

  it('hands out each seconds setting in milliseconds, converted once', () => {
    const config = loadConfig({
      CACHE_FRESH_SECONDS: '7',
      CACHE_STALE_SECONDS: '11',
      RPC_OVERRIDE_CACHE_SECONDS: '13',
      COLD_MISS_WINDOW_SECONDS: '17',
    });
    expect(config).toMatchObject({
      CACHE_FRESH_MS: 7000,
      CACHE_STALE_MS: 11000,
      RPC_OVERRIDE_CACHE_MS: 13000,
      COLD_MISS_WINDOW_MS: 17000,
    });
  });

  it('parses numbers and reduces allowlist entries to origins', () => {
    const config = loadConfig({
      PORT: '8080',
      RPC_URL: 'https://rpc.example.com/?api-key=x',
      RPC_OVERRIDE_ALLOWLIST: 'http://127.0.0.1:8899/, https://rpc.example.com/path',
      ROLE: 'worker',
    });
    expect(config.PORT).toBe(8080);
    expect(config.ROLE).toBe('worker');
    expect(config.RPC_OVERRIDE_ALLOWLIST).toEqual([
      'http://127.0.0.1:8899',
      'https://rpc.example.com',
    ]);
  });

  it('reads TRUST_PROXY as a hop count or proxy addresses, and refuses true saying what to set', () => {
    expect(loadConfig({}).TRUST_PROXY).toBe(false);
    expect(loadConfig({ TRUST_PROXY: 'false' }).TRUST_PROXY).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '0' }).TRUST_PROXY).toBe(false);
    expect(loadConfig({ TRUST_PROXY: '2' }).TRUST_PROXY).toBe(2);
    expect(
      loadConfig({ TRUST_PROXY: '10.0.0.0/8, 127.0.0.1,::1,fd00::/8,loopback' }).TRUST_PROXY,
    ).toEqual(['10.0.0.0/8', '127.0.0.1', '::1', 'fd00::/8', 'loopback']);
    expect(() => loadConfig({ TRUST_PROXY: 'true' })).toThrow(ConfigError);
    expect(() => loadConfig({ TRUST_PROXY: 'true' })).toThrow(
      /TRUST_PROXY: true would trust the left-most X-Forwarded-For, which the client writes: set the number of proxies/,
    );
    expect(() => loadConfig({ TRUST_PROXY: '10.0.0.0/8,proxy.example.com' })).toThrow(
      /TRUST_PROXY: "proxy.example.com" is not an address, a CIDR or a hop count/,
    );
    expect(() => loadConfig({ TRUST_PROXY: '10.0.0.0/33' })).toThrow(/TRUST_PROXY:/);
  });

  it('derives the websocket endpoint from RPC_URL as web3.js does, unless set or turned off', () => {
    const ws = (env: Record<string, string>) => loadConfig(env).RPC_WS_URL;
    expect(ws({ RPC_URL: 'http://127.0.0.1:8899' })).toBe('ws://127.0.0.1:8900/');
    expect(ws({ RPC_URL: 'https://rpc.example/?api-key=k' })).toBe('wss://rpc.example/?api-key=k');
    expect(ws({ RPC_URL: 'http://[::1]:80/a' })).toBe('ws://[::1]:81/a');
    expect(ws({ RPC_URL: 'http://a.example', RPC_WS_URL: 'wss://b.example/ws' })).toBe(
      'wss://b.example/ws',
    );
    expect(ws({ RPC_URL: 'http://a.example', RPC_WS: 'off' })).toBeUndefined();
    expect(ws({})).toBeUndefined();
    expect(() => loadConfig({ RPC_WS_URL: 'http://a.example' })).toThrow(/RPC_WS_URL/);
  });

  it('parses the RPC cost table', () => {
    expect(loadConfig({}).RPC_CREDITS).toMatchObject({
      getProgramAccounts: 10,
      getProgramAccountsV2: 10,
      '*': 1,
    });
    // Method names with digits (getProgramAccountsV2) are names too; `*` stands alone.
    expect(loadConfig({ RPC_CREDITS: 'getProgramAccountsV2=30' }).RPC_CREDITS).toEqual({
      getProgramAccountsV2: 30,
    });
    expect(() => loadConfig({ RPC_CREDITS: '2x=1' })).toThrow(/RPC_CREDITS:/);
    expect(() => loadConfig({ RPC_CREDITS: 'get*=1' })).toThrow(/RPC_CREDITS:/);
    expect(
      loadConfig({ RPC_CREDITS: 'getProgramAccounts=100, getMultipleAccounts=2,*=1' }).RPC_CREDITS,
    ).toEqual({
      getProgramAccounts: 100,
      getMultipleAccounts: 2,
      '*': 1,
    });
    expect(() => loadConfig({ RPC_CREDITS: 'gPA:10' })).toThrow(/RPC_CREDITS:/);
  });

  it('reads RPC_CREDITS_PER_DAY as a positive number of credits, unset or empty: no budget', () => {
    expect(loadConfig({}).RPC_CREDITS_PER_DAY).toBeUndefined();
    expect(loadConfig({ RPC_CREDITS_PER_DAY: '' }).RPC_CREDITS_PER_DAY).toBeUndefined();
    expect(loadConfig({ RPC_CREDITS_PER_DAY: '250000' }).RPC_CREDITS_PER_DAY).toBe(250_000);
    expect(loadConfig({ RPC_CREDITS_PER_DAY: '12.5' }).RPC_CREDITS_PER_DAY).toBe(12.5);
    for (const bad of ['0', '-5', 'lots']) {
      expect(() => loadConfig({ RPC_CREDITS_PER_DAY: bad })).toThrow(/RPC_CREDITS_PER_DAY:/);
    }
  });

  it('parses REDIS_CLUSTER_NODES into frozen seeds and makes the prefix a hash tag', () => {
    expect(loadConfig({}).REDIS_CLUSTER_NODES).toBeUndefined();
    const config = loadConfig({ REDIS_CLUSTER_NODES: ' 10.0.0.1:7000, [::1]:7001,redis-b:6379 ' });
    expect(config.REDIS_CLUSTER_NODES).toEqual([
      { host: '10.0.0.1', port: 7000 },
      { host: '::1', port: 7001 },
      { host: 'redis-b', port: 6379 },
    ]);
    expect(Object.isFrozen(config.REDIS_CLUSTER_NODES)).toBe(true);
    expect(Object.isFrozen(config.REDIS_CLUSTER_NODES?.[0])).toBe(true);
    expect(config.QUEUE_PREFIX).toBe('{sns}');
    for (const bad of ['10.0.0.1', 'a:1,', 'a:1,,b:2', '::1:7000', 'a:123456']) {
      expect(() => loadConfig({ REDIS_CLUSTER_NODES: bad }), bad).toThrow(/REDIS_CLUSTER_NODES:/);
    }
  });

  it('never repeats a credential in a refusal, and refuses an allowlist entry that has one', () => {
    const refusal = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (err) {
        return String(err);
      }
      return 'accepted';
    };
    const envs: Array<Record<string, string>> = [
      { REDIS_CLUSTER_NODES: 'u:Secret10@h:1' },
      { REDIS_CLUSTER_NODES: 'a:1,redis://u:Secret10@h' },
      { RPC_OVERRIDE_ALLOWLIST: 'https://u:Secret10@rpc.example.com' },
      { RPC_OVERRIDE_ALLOWLIST: 'ftp://u:Secret10@rpc.example.com' },
      { REDIS_URL: 'redis://u:Secret10@h:6379/99' },
      { REDIS_URL: 'redis://u:Secret10@h:6379/x' },
    ];
    for (const env of envs) {
      const text = refusal(env);
      expect(text, JSON.stringify(env)).toMatch(/invalid configuration/);
      expect(text, JSON.stringify(env)).not.toContain('Secret10');
    }
    expect(refusal({ RPC_OVERRIDE_ALLOWLIST: 'https://key@rpc.example.com' })).toMatch(
      /carries credentials/,
    );
  });

  it('takes the database REDIS_URL names, as ioredis selects it, from 0 to 15', async () => {
    for (const [url, db] of [
      ['redis://h:6379', 0],
      ['redis://h:6379/', 0],
      ['redis://h:6379/7', 7],
      ['rediss://u:p@h:6379/15', 15],
      ['redis://h:6379?db=3', 3],
      ['redis://h:6379/4?db=3', 4],
    ] as const) {
      expect(redisUrlDatabase(url), url).toBe(db);
      expect(() => loadConfig({ REDIS_URL: url }), url).not.toThrow();
      // What the connections select is what the configuration read.
      const connection = createRedis(loadConfig({ REDIS_URL: url }), 'command', 'config-test');
      connection.disconnect();
      expect(databaseOf(connection), url).toBe(db);
    }
    for (const [env, message] of [
      [{ REDIS_URL: 'redis://h:6379/16' }, /database 16: 0 to 15 only/],
      [{ REDIS_URL: 'redis://h:6379/db1' }, /"db1" is not a database number/],
      [{ REDIS_URL: 'redis://h:6379?db=-1' }, /"-1" is not a database number/],
      [{ REDIS_URL: 'redis://h:6379/3', REDIS_CLUSTER_NODES: 'a:7000' }, /database 0 only/],
    ] as const) {
      expect(() => loadConfig(env), env.REDIS_URL).toThrow(message);
    }
    expect(
      loadConfig({ REDIS_URL: 'redis://h:6379/0', REDIS_CLUSTER_NODES: 'a:7000' }),
    ).toBeTruthy();
  });

  it('treats empty values as unset', () => {
    const config = loadConfig({ RPC_URL: '', PORT: '' });
    expect(config.RPC_URL).toBeUndefined();
    expect(config.PORT).toBe(3000);
  });

  it.each([
    [{ PORT: 'eighty' }, 'PORT'],
    [{ PORT: '70000' }, 'PORT'],
    [{ RPC_URL: 'ftp://x' }, 'RPC_URL'],
    [{ REDIS_URL: 'http://localhost' }, 'REDIS_URL'],
    [{ ROLE: 'both' }, 'ROLE'],
    [{ QUEUE_PREFIX: 'a:b' }, 'QUEUE_PREFIX'],
    [{ RPC_OVERRIDE_ALLOWLIST: 'not a url' }, 'RPC_OVERRIDE_ALLOWLIST'],
    [{ CACHE_FRESH_SECONDS: '100', CACHE_STALE_SECONDS: '10' }, 'CACHE_STALE_SECONDS'],
  ])('refuses %j naming %s', (env, name) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(new RegExp(`${name}:`));
  });
});

/** The rows of docs/configuration.md's table of variables, header and rule included. */
function configurationRows(): string[] {
  const doc = readFileSync(new URL('../docs/configuration.md', import.meta.url), 'utf8');
  const table = doc.slice(doc.indexOf('## Variables'));
  return table
    .slice(0, table.indexOf('\n## '))
    .split('\n')
    .filter((l) => l.startsWith('|'));
}

/** The backticked values of a table cell, in order (`a`, `b` -> ['a', 'b']). */
const quoted = (cell: string) => [...cell.matchAll(/`([^`]*)`/g)].map((m) => m[1] as string);

/**
 * Variables whose documented default is prose rather than a value, and how the schema's default is
 * held against it instead.
 */
const PROSE_DEFAULTS: Record<string, { prose: string; check: (value: unknown) => boolean }> = {
  // Unset: no value at all.
  RPC_URL: { prose: 'unset', check: (v) => v === undefined },
  REDIS_CLUSTER_NODES: { prose: 'unset', check: (v) => v === undefined },
  ADMIN_TOKEN: { prose: 'unset', check: (v) => v === undefined },
  RPC_CREDITS_PER_DAY: { prose: 'unset', check: (v) => v === undefined },
  // Derived from RPC_URL, which is unset by default: nothing to derive from.
  RPC_WS_URL: { prose: 'derived', check: (v) => v === undefined },
  // The cost table lives in one place, the schema's default (a new method's cost is one entry).
  RPC_CREDITS: {
    prose: 'the cost table `DEFAULT_RPC_CREDITS`, src/core/config.ts',
    check: (v) =>
      isDeepStrictEqual(v, loadConfig({ RPC_CREDITS: DEFAULT_RPC_CREDITS }).RPC_CREDITS),
  },
  // Empty: the list of no origins.
  RPC_OVERRIDE_ALLOWLIST: {
    prose: 'empty',
    check: (v) => Array.isArray(v) && v.length === 0,
  },
};

describe('docs/configuration.md', () => {
  it('documents every variable of the schema in its table', () => {
    const rows = configurationRows();
    for (const name of Object.keys(configSchema.in.shape)) {
      expect(
        rows.some((row) => (row.split('|')[1] ?? '').includes(`\`${name}\``)),
        name,
      ).toBe(true);
    }
  });

  it("states each variable's default as the schema has it", () => {
    const defaults: Record<string, unknown> = loadConfig({});
    const checked = new Set<string>();
    for (const row of configurationRows().slice(2)) {
      const [, names = '', given = ''] = row.split('|');
      const variables = quoted(names);
      const values = quoted(given);
      for (const [i, name] of variables.entries()) {
        const prose = PROSE_DEFAULTS[name];
        if (prose) {
          expect(given.trim(), name).toBe(prose.prose);
          expect(prose.check(defaults[name]), name).toBe(true);
        } else {
          // Parsed the way a deployment's own value would be: the documented form (bytes, seconds,
          // a cost list) then compares with the schema's default whatever its parsed type.
          const value = values[i];
          expect(value, `${name}: no default in docs/configuration.md`).toBeDefined();
          expect(loadConfig({ [name]: value })[name as keyof Config], name).toEqual(defaults[name]);
        }
        checked.add(name);
      }
    }
    expect([...checked].sort()).toEqual(Object.keys(configSchema.in.shape).sort());
  });
});
