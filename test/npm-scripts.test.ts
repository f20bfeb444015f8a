import { spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { DEMO_PREFIX, GET_A_REDIS, shownUrl } from '../tools/demo/redis.js';
import { NOT_FOLLOWING } from '../tools/demo/text.js';
import { deletePrefix, uniquePrefix, waitFor } from './support/gateway.js';
import { alive, groupAlive, killGroup, listening, npmRun } from './support/npm-run.js';
import { freePort } from './support/ports.js';
import { inDatabase } from './support/shared-redis.js';
import { hasBinary } from './support/programs.js';

/**
 * `npm start`, `npm run rpc:sim` and `npm run demo` as a process manager (or a terminal) runs them: a SIGTERM to npm reaches the
 * program (no shell left in between to swallow it), which shuts down and frees its port; and
 * `npm start` compiles only when a source changed since the last build.
 */

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const BUILD_IF_STALE = join(ROOT, 'scripts', 'build-if-stale.mjs');

describe('npm start', () => {
  it('passes a SIGTERM sent to npm on to the gateway, which exits and frees its ports', async () => {
    const [port, metricsPort] = [await freePort(), await freePort()];
    const prefix = uniquePrefix();
    const run = npmRun('start', {
      REDIS_URL: inject('redisUrl'),
      PORT: String(port),
      WORKER_METRICS_PORT: String(metricsPort),
      HOST: '127.0.0.1',
      QUEUE_PREFIX: prefix,
      ROLE: 'all',
    });
    const redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
    try {
      // The first start may compile dist/ (tens of seconds on a small machine).
      await waitFor(() => run.output().includes('sns-gateway started'), 120_000);
      const started = run
        .output()
        .split('\n')
        .find((l) => l.includes('sns-gateway started'));
      const gatewayPid = (JSON.parse(started as string) as { pid: number }).pid;
      expect(await listening(port)).toBe(true);
      expect(await listening(metricsPort)).toBe(true);

      run.child.kill('SIGTERM');
      expect(await run.exited).toBe(0);
      await waitFor(() => !alive(gatewayPid), 5_000);
      expect(await listening(port)).toBe(false);
      expect(await listening(metricsPort)).toBe(false);
      expect(run.output()).toContain('shut down cleanly');
      // The build is current now: the next start compiles nothing.
      expect(spawnSync(process.execPath, [BUILD_IF_STALE, '--check'], { cwd: ROOT }).status).toBe(
        0,
      );
      // The Lua scripts are beside the compiled modules that read them.
      const lua = ['src', 'worker'].flatMap((dir) =>
        readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
          .filter((f) => f.endsWith('.lua'))
          .map((f) => join(dir, f)),
      );
      expect(lua).not.toEqual([]);
      for (const file of lua) expect(existsSync(join(ROOT, 'dist', file)), file).toBe(true);
    } finally {
      killGroup(run.child);
      await deletePrefix(redis, prefix);
      redis.disconnect();
    }
  }, 180_000);
});

describe('npm run rpc:sim', () => {
  it('passes a SIGTERM sent to npm on to the simulator, which exits and frees its port', async () => {
    const port = await freePort();
    const run = npmRun('rpc:sim', { RPC_SIM_PORT: String(port) });
    try {
      await waitFor(() => run.output().includes('listening on'), 60_000);
      expect(await listening(port)).toBe(true);
      run.child.kill('SIGTERM');
      expect(await run.exited).toBe(0);
      await waitFor(async () => !(await listening(port)), 5_000);
    } finally {
      killGroup(run.child);
    }
  }, 90_000);
});

describe('scripts/build-if-stale.mjs', () => {
  it('asks for a build when there is none, or when an input is newer than the last one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'sns-gateway-build-'));
    const check = () =>
      spawnSync(process.execPath, [BUILD_IF_STALE, '--check'], { cwd: dir }).status;
    /** Sets a path's modification time, in seconds from now. */
    const age = (path: string, seconds: number) => {
      const t = new Date(Date.now() + seconds * 1000);
      utimesSync(join(dir, path), t, t);
    };
    try {
      for (const sub of ['src/api/http', 'src/core/lua', 'worker', 'dist'])
        mkdirSync(join(dir, sub), { recursive: true });
      for (const file of [
        'main.ts',
        'src/api/http/app.ts',
        'src/core/lua/touch-entry.lua',
        'worker/runtime.ts',
        'tsconfig.json',
        'tsconfig.build.json',
        'package.json',
        'package-lock.json',
      ]) {
        writeFileSync(join(dir, file), '');
      }
      const inputs = [
        'main.ts',
        'src',
        'src/api',
        'src/api/http',
        'src/api/http/app.ts',
        'src/core',
        'src/core/lua',
        'src/core/lua/touch-entry.lua',
        'worker',
        'worker/runtime.ts',
        'tsconfig.json',
        'tsconfig.build.json',
        'package.json',
        'package-lock.json',
      ];
      const builtAfterAll = () => {
        for (const path of inputs) age(path, -100);
        writeFileSync(join(dir, 'dist/.build-stamp'), '');
        age('dist/.build-stamp', -50);
      };
      expect(check()).toBe(1); // never built

      builtAfterAll();
      expect(check()).toBe(0);

      for (const path of [
        'main.ts',
        'src/api/http/app.ts',
        'src/core/lua/touch-entry.lua',
        'worker/runtime.ts',
        'tsconfig.build.json',
        'package.json',
        'package-lock.json',
      ]) {
        builtAfterAll();
        age(path, -10);
        expect(check(), path).toBe(1);
      }
      // A removed source changes only its folder's time.
      builtAfterAll();
      rmSync(join(dir, 'src/api/http/app.ts'));
      expect(check()).toBe(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** Live processes whose command line, and environment (NUL-separated), pass `test`. */
function processesWhere(test: (cmdline: string, environ: string) => boolean): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
      const environ = `\0${readFileSync(`/proc/${entry}/environ`, 'utf8')}`;
      if (test(cmdline, environ)) found.push(Number(entry));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

/** The lines of the demo's banner between `heading` and the next blank line, trimmed. */
function bannerLines(output: string, heading: string): string[] {
  const after = output.split(`\n${heading}\n`)[1] ?? '';
  return after
    .split('\n\n')[0]!
    .split('\n')
    .map((l) => l.trim());
}

/** Runs one printed command with bash, as a user pastes it. */
function sh(command: string): string {
  const done = spawnSync('bash', ['-o', 'pipefail', '-c', command], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  return done.stdout.trim();
}

/** The loopback port of `host:port`. */
const portOf = (hostPort: string) => Number(hostPort.split(':').at(-1));

describe('npm run demo', () => {
  it.skipIf(!hasBinary('redis-server'))(
    'starts redis-server, the simulator and the gateway; its printed commands answer; SIGTERM to npm stops all',
    async () => {
      const [api, metrics, sim, redisPort] = [
        await freePort(),
        await freePort(),
        await freePort(),
        await freePort(),
      ];
      const run = npmRun('demo', {
        PORT: String(api),
        WORKER_METRICS_PORT: String(metrics),
        RPC_SIM_PORT: String(sim),
        // Nothing listens there: the demo starts a redis-server of its own on that port.
        REDIS_URL: `redis://127.0.0.1:${redisPort}`,
      });
      try {
        await waitFor(() => /Ctrl-C stops everything|demo: stopped/.test(run.output()), 150_000);
        const output = run.output();
        expect(output).toContain(`Redis at redis://127.0.0.1:${redisPort} (started for the demo)`);
        // The banner waits for the worker to follow the chain: the walkthrough's creation shows.
        expect(output).not.toContain(NOT_FOLLOWING);

        const urls = bannerLines(output, 'Open:').map((l) => l.split(' ')[0] as string);
        expect(urls).toEqual([
          `http://localhost:${api}/`,
          `http://localhost:${api}/docs`,
          `http://localhost:${metrics}/metrics`,
        ]);
        for (const url of urls) {
          const res = await fetch(url.replace('localhost', '127.0.0.1'));
          expect(res.status, url).toBe(200);
        }

        const commands = bannerLines(output, 'Try:');
        expect(commands).toHaveLength(4);
        const [list, derive, create, again] = commands as [string, string, string, string];
        expect(sh(list)).toBe('{"s":"ok","result":["bullish","hollaaa","testing"]}');
        expect(sh(derive)).toBe(
          '{"s":"ok","result":"ETARvCjLwjyM6Jux1ndxuXuYEYy56Nf5uvU3abL1WyW6"}',
        );
        expect(sh(create)).toContain('"subdomain":"GSpPmrfxMFuN2JtAqdSygLtWTvYc6kztXHGuMz3mwxSC"');
        await waitFor(() => sh(again).includes('"fresh"'), 20_000);
        expect(sh(again)).toBe('{"s":"ok","result":["bullish","fresh","hollaaa","testing"]}');

        // What runs: the gateway and the redis-server, each once; the simulator's two ports.
        const simPort = portOf(/curl -s (\S+) -H/.exec(create)?.[1] ?? '');
        const gateway = processesWhere(
          (cmd, env) => cmd.includes('dist/main.js') && env.includes(`\0PORT=${api}\0`),
        );
        const redis = processesWhere(
          (cmd) => cmd.startsWith('redis-server') && cmd.includes(`:${redisPort}`),
        );
        expect(gateway).toHaveLength(1);
        expect(redis).toHaveLength(1);
        const ports = [api, metrics, simPort, simPort + 1, redisPort];
        for (const port of ports) expect(await listening(port), String(port)).toBe(true);

        run.child.kill('SIGTERM');
        expect(await run.exited).toBe(0);
        await waitFor(() => [...gateway, ...redis].every((pid) => !alive(pid)), 10_000);
        // No orphan: nothing npm started is left in its process group, nor elsewhere.
        await waitFor(() => !groupAlive(run.child.pid as number), 10_000);
        expect(processesWhere((cmd, env) => env.includes(`\0PORT=${api}\0`))).toEqual([]);
        for (const port of ports) expect(await listening(port), String(port)).toBe(false);
        expect(run.output()).toContain('demo: stopped');
      } finally {
        killGroup(run.child);
      }
    },
    240_000,
  );

  it('uses a Redis that answers, leaves none of its keys there, and stops on Ctrl-C', async () => {
    const [api, metrics, sim] = [await freePort(), await freePort(), await freePort()];
    // A database of its own: the demo's keys have one prefix, which it clears at start.
    const redisUrl = inDatabase(inject('redisUrl'), 11);
    const run = npmRun('demo', {
      PORT: String(api),
      WORKER_METRICS_PORT: String(metrics),
      RPC_SIM_PORT: String(sim),
      REDIS_URL: redisUrl,
    });
    const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
    const demoKeys = async () => (await redis.keys(`${DEMO_PREFIX}:*`)).length;
    try {
      await waitFor(() => /Ctrl-C stops everything|demo: stopped/.test(run.output()), 150_000);
      expect(run.output()).toContain(`Redis at ${shownUrl(redisUrl)}\n`);
      const [list] = bannerLines(run.output(), 'Try:');
      expect(sh(list ?? '')).toBe('{"s":"ok","result":["bullish","hollaaa","testing"]}');
      expect(await demoKeys()).toBeGreaterThan(0);

      // Ctrl-C: the terminal signals the whole foreground group, npm and the demo alike.
      process.kill(-(run.child.pid as number), 'SIGINT');
      expect(await run.exited).toBe(0);
      await waitFor(() => !groupAlive(run.child.pid as number), 10_000);
      expect(processesWhere((cmd, env) => env.includes(`\0PORT=${api}\0`))).toEqual([]);
      expect(await demoKeys()).toBe(0);
      for (const port of [api, metrics]) expect(await listening(port), String(port)).toBe(false);
    } finally {
      killGroup(run.child);
      redis.disconnect();
    }
  }, 240_000);

  it('says in one line how to get a Redis when none answers and redis-server is missing', async () => {
    const port = await freePort();
    const demo = spawnSync(process.execPath, ['--import', 'tsx', 'tools/demo/cli.ts'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 60_000,
      // No PATH: no redis-server to start.
      env: { ...process.env, PATH: '', REDIS_URL: `redis://127.0.0.1:${port}` },
    });
    expect(demo.status).toBe(1);
    const said = demo.stderr.split('\n').filter((l) => l.includes('redis-server'));
    expect(said).toEqual([
      `demo: no Redis answers at redis://127.0.0.1:${port} and redis-server is not on the PATH: ${GET_A_REDIS}`,
    ]);
  }, 90_000);
});
