import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { describe, expect, inject, it } from 'vitest';
import { deletePrefix, uniquePrefix, waitFor } from './support/gateway.js';
import { freePort } from './support/ports.js';

/**
 * `npm start` and `npm run rpc:sim` as a process manager runs them: a SIGTERM to npm reaches the
 * program (no shell left in between to swallow it), which shuts down and frees its port; and
 * `npm start` compiles only when a source changed since the last build.
 */

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const BUILD_IF_STALE = join(ROOT, 'scripts', 'build-if-stale.mjs');

type Run = { child: ChildProcess; output: () => string; exited: Promise<number | null> };

/** Runs `npm run <script>` in its own process group, so that clean-up can reach everything. */
function npmRun(script: string, env: Record<string, string>): Run {
  const child = spawn('npm', ['run', script], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  const reap = () => killGroup(child);
  process.once('exit', reap);
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      process.off('exit', reap);
      resolve(code);
    }),
  );
  return { child, output: () => out, exited };
}

/** SIGKILLs the whole process group of `npmRun`: what a shell left behind included. */
function killGroup(child: ChildProcess): void {
  try {
    process.kill(-(child.pid as number), 'SIGKILL');
  } catch {
    // already gone
  }
}

/** True when something accepts TCP connections on loopback `port`. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

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
