/**
 * The gateway's HTTP caching headers, checked against a real shared cache: nginx (Debian's
 * package) as a caching reverse proxy in front of the real API and worker. nginx decides what to
 * store and for how long only from what the origin sends (no `proxy_cache_valid`), so what it does
 * here is what a CDN that follows RFC 9111 would do with the same answers.
 *
 * Origin requests are counted twice: in nginx's access log (`$upstream_status`, `-` when nginx
 * answered from its cache) and in the API's own `http_request_duration_seconds_count`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedDemo, startGateway, waitFor, type Gateway } from './support/gateway.js';
import { startRpcSimulator, type RpcSimulator } from '../tools/rpc-sim/index.js';
import { freePort } from './support/ports.js';
import { findBinary } from './support/programs.js';
import { until } from './support/wait.js';

/** nginx from the PATH, or where Debian puts it (`/usr/sbin` is not on every user's PATH). */
function findNginx(): { bin?: string; why?: string } {
  const bin = findBinary('nginx');
  if (bin && spawnSync(bin, ['-v'], { encoding: 'utf8' }).status === 0) return { bin };
  return { why: 'nginx is not installed (scripts/install-test-deps.sh installs nginx-light)' };
}

const nginx = findNginx();
if (!nginx.bin) console.warn(`http-cache-nginx.test: skipped: ${nginx.why}`);

type LogLine = {
  method: string;
  uri: string;
  status: string;
  upstream_status: string;
  cache: string;
};

type Nginx = {
  url: string;
  /** Every access log line so far, parsed (`log_subrequest` adds background refreshes). */
  log(): LogLine[];
  stop(): Promise<void>;
};

const accepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

function nginxConf(dir: string, port: number, origin: URL): string {
  // Started as root, the master would hand the workers to `nobody`, who cannot enter the 0700
  // temporary folder; as anyone else the workers keep the user nginx was started as.
  const user = process.getuid?.() === 0 ? 'user root;' : '';
  return `
${user}
worker_processes 1;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 256; }
http {
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy_temp;
  fastcgi_temp_path ${dir}/fastcgi_temp;
  uwsgi_temp_path ${dir}/uwsgi_temp;
  scgi_temp_path ${dir}/scgi_temp;
  log_format cachelog escape=json
    '{"method":"$request_method","uri":"$request_uri","status":"$status",'
    '"upstream_status":"$upstream_status","cache":"$upstream_cache_status"}';
  access_log ${dir}/access.log cachelog;
  proxy_cache_path ${dir}/cache levels=1:2 keys_zone=gateway:1m max_size=16m inactive=10m
                   use_temp_path=off;
  upstream origin {
    server ${origin.host};
    keepalive 4;
  }
  server {
    listen 127.0.0.1:${port};
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    proxy_cache gateway;
    # As the client asked (left out, nginx keys on the proxied URI: /swr/x and /x would share).
    proxy_cache_key $scheme$proxy_host$request_uri;
    # Expired entries are revalidated with the stored ETag (If-None-Match), not fetched again.
    proxy_cache_revalidate on;
    proxy_cache_use_stale updating error timeout http_500 http_502 http_503;
    proxy_cache_lock on;
    add_header X-Proxy-Cache $upstream_cache_status always;
    # Revalidation in the request that finds the entry expired: its answer says REVALIDATED.
    location / {
      proxy_pass http://origin;
    }
    # The same origin under /swr/ with background updates: an expired entry is answered at once
    # (STALE) and revalidated by a subrequest behind it, logged thanks to log_subrequest.
    location /swr/ {
      proxy_cache_background_update on;
      log_subrequest on;
      proxy_pass http://origin/;
    }
  }
}
`;
}

/** Writes a config into a fresh temporary folder and runs nginx in the foreground on it. */
async function startNginx(bin: string, originUrl: string): Promise<Nginx> {
  const dir = mkdtempSync(join(tmpdir(), 'snsgw-nginx-'));
  const conf = join(dir, 'nginx.conf');
  let child: ChildProcess | undefined;
  let output = '';
  try {
    // The port is free when asked, not necessarily when nginx binds it: retry on a clash.
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      writeFileSync(conf, nginxConf(dir, port, new URL(originUrl)));
      const proc = spawn(
        bin,
        ['-p', `${dir}/`, '-c', conf, '-e', join(dir, 'error.log'), '-g', 'daemon off;'],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      child = proc;
      output = '';
      proc.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      proc.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      let exited = false;
      proc.once('exit', () => (exited = true));
      await waitFor(async () => exited || (await accepts(port)), 10_000);
      if (!exited) {
        const log = join(dir, 'access.log');
        return {
          url: `http://127.0.0.1:${port}`,
          log: () =>
            existsSync(log)
              ? readFileSync(log, 'utf8')
                  .split('\n')
                  .filter(Boolean)
                  .map((line) => JSON.parse(line) as LogLine)
              : [],
          async stop() {
            if (proc.exitCode === null && proc.signalCode === null) {
              const gone = new Promise((resolve) => proc.once('exit', resolve));
              proc.kill('SIGTERM'); // nginx's fast shutdown: the master stops its workers
              await gone;
            }
            rmSync(dir, { recursive: true, force: true });
          },
        };
      }
      const errors = existsSync(join(dir, 'error.log'))
        ? readFileSync(join(dir, 'error.log'), 'utf8')
        : '';
      if (!/Address already in use/.test(output + errors) || attempt >= 3) {
        throw new Error(`nginx exited at start-up: ${output}${errors}`);
      }
    }
  } catch (err) {
    child?.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}

type Answer = { status: number; headers: Headers; body: string };

async function get(url: string, init?: RequestInit): Promise<Answer> {
  const res = await fetch(url, init);
  return { status: res.status, headers: res.headers, body: await res.text() };
}

const LABELS = JSON.stringify({ s: 'ok', result: ['bullish', 'hollaaa', 'testing'] });
const BONFIDA_SOL = 'ETARvCjLwjyM6Jux1ndxuXuYEYy56Nf5uvU3abL1WyW6';

describe.skipIf(!nginx.bin)('nginx as an HTTP cache in front of the gateway', () => {
  let sim: RpcSimulator;
  let gw: Gateway;
  let proxy: Nginx;

  beforeAll(async () => {
    sim = await startRpcSimulator({ chain: seedDemo() });
    gw = await startGateway({
      sim,
      env: {
        // A freshness lifetime of one second, so that expiry comes within the test.
        CACHE_FRESH_SECONDS: '1',
        // No scheduled refreshes of hot parents: the entry changes only when asked.
        HOT_KEYS_TOP_N: '0',
        // The simulator is the one `?rpc=` accepted (loopback and http: only when listed).
        RPC_OVERRIDE_ALLOWLIST: sim.url,
      },
    });
    proxy = await startNginx(nginx.bin!, gw.baseUrl);
  });

  afterAll(async () => {
    await proxy?.stop();
    await gw?.close();
    await sim?.close();
  });

  /** Requests the API itself answered for `route` (and `status`), from its own histogram. */
  async function originCount(route: string, status?: string): Promise<number> {
    const { values } = await gw.metrics.httpDuration.get();
    return values
      .filter(
        (v) =>
          v.metricName === 'http_request_duration_seconds_count' &&
          v.labels.route === route &&
          (status === undefined || v.labels.status_code === status),
      )
      .reduce((sum, v) => sum + v.value, 0);
  }

  /** The access log lines of `uri`, once there are at least `count` of them. */
  async function logOf(uri: string, count: number): Promise<LogLine[]> {
    const lines = () => proxy.log().filter((l) => l.uri === uri);
    await waitFor(() => lines().length >= count, 5_000);
    return lines();
  }

  /** Asks until nginx no longer answers from a fresh entry (max-age passed); that answer. */
  async function untilExpired(url: string): Promise<Answer> {
    return until(
      async () => {
        const res = await get(url);
        return res.headers.get('x-proxy-cache') !== 'HIT' ? res : undefined;
      },
      `${url} no longer a HIT with max-age=1`,
      8_000,
      200,
    );
  }

  const SUBDOMAINS = '/subdomains/:parent';

  it('stores /subdomains answers: repeats within max-age are HITs that never reach the origin', async () => {
    const first = await get(`${proxy.url}/subdomains/67679`);
    expect(first.status).toBe(200);
    expect(first.body).toBe(LABELS);
    expect(first.headers.get('x-proxy-cache')).toBe('MISS');
    expect(first.headers.get('x-cache')).toBe('MISS'); // the gateway's own cache was cold too
    const rest = gw.config.CACHE_STALE_SECONDS - 1;
    expect(first.headers.get('cache-control')).toBe(
      `public, max-age=1, stale-while-revalidate=${rest}, stale-if-error=${rest}`,
    );
    expect(first.headers.get('etag')).toMatch(/^"[^"]+"$/); // strong
    await waitFor(async () => (await originCount(SUBDOMAINS)) === 1);

    // At once (the entry is fresh for one second): five more, all from nginx's store.
    const repeats = await Promise.all(
      Array.from({ length: 5 }, () => get(`${proxy.url}/subdomains/67679`)),
    );
    for (const res of repeats) {
      expect(res.status).toBe(200);
      expect(res.body).toBe(LABELS);
      expect(res.headers.get('x-proxy-cache')).toBe('HIT');
      expect(res.headers.get('etag')).toBe(first.headers.get('etag'));
    }
    const log = await logOf('/subdomains/67679', 6);
    expect(log.map((l) => l.upstream_status)).toEqual(['200', '', '', '', '', '']);
    expect(log.map((l) => l.cache)).toEqual(['MISS', 'HIT', 'HIT', 'HIT', 'HIT', 'HIT']);
    expect(await originCount(SUBDOMAINS)).toBe(1);
  });

  it('revalidates with If-None-Match once max-age has passed: the origin answers 304', async () => {
    const before304 = await originCount(SUBDOMAINS, '304');
    const linesBefore = (await logOf('/subdomains/67679', 1)).length;

    const revalidated = await untilExpired(`${proxy.url}/subdomains/67679`);
    expect(revalidated.status).toBe(200);
    expect(revalidated.body).toBe(LABELS); // the stored body, not sent again by the origin
    expect(revalidated.headers.get('x-proxy-cache')).toBe('REVALIDATED');

    const log = await logOf('/subdomains/67679', linesBefore + 1);
    expect(log.at(-1)).toMatchObject({
      status: '200',
      upstream_status: '304',
      cache: 'REVALIDATED',
    });
    // The ETag hook answers 304 only to a matching If-None-Match (no Last-Modified is sent).
    await waitFor(async () => (await originCount(SUBDOMAINS, '304')) === before304 + 1);

    // The 304's Cache-Control made the entry fresh again.
    const after = await get(`${proxy.url}/subdomains/67679`);
    expect(after.headers.get('x-proxy-cache')).toBe('HIT');
    expect(after.body).toBe(LABELS);
  });

  it('with background updates, serves an expired entry at once and revalidates it behind', async () => {
    const url = `${proxy.url}/swr/subdomains/67679`;
    const first = await get(url);
    expect(first.headers.get('x-proxy-cache')).toBe('MISS');
    expect(first.body).toBe(LABELS);

    const stale = await untilExpired(url);
    expect(stale.status).toBe(200);
    expect(stale.body).toBe(LABELS);
    expect(stale.headers.get('x-proxy-cache')).toBe('STALE');
    // The subrequest that refreshed the entry sent If-None-Match and got 304.
    await waitFor(() =>
      proxy
        .log()
        .some(
          (l) =>
            l.uri === '/swr/subdomains/67679' &&
            l.upstream_status === '304' &&
            l.cache === 'REVALIDATED',
        ),
    );
    const after = await get(url);
    expect(after.headers.get('x-proxy-cache')).toBe('HIT');
  });

  it('never stores ?rpc= answers (no-store): every one reaches the origin', async () => {
    const path = `/subdomains/67679?rpc=${encodeURIComponent(sim.url)}`;
    const before = await originCount(SUBDOMAINS, '200');
    for (let i = 0; i < 3; i++) {
      const res = await get(proxy.url + path);
      expect(res.status).toBe(200);
      expect(res.body).toBe(LABELS);
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.headers.get('x-proxy-cache')).toBe('MISS');
    }
    const log = await logOf(path, 3);
    expect(log.map((l) => l.upstream_status)).toEqual(['200', '200', '200']);
    await waitFor(async () => (await originCount(SUBDOMAINS, '200')) === before + 3);
  });

  it('stores derivations (immutable): one origin request, then HITs and 304s from nginx', async () => {
    const route = '/record-key-v2/:domain/:record';
    const path = '/record-key-v2/bonfida/SOL';
    const first = await get(proxy.url + path);
    expect(first.status).toBe(200);
    expect(JSON.parse(first.body)).toEqual({ s: 'ok', result: BONFIDA_SOL });
    expect(first.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(first.headers.get('x-proxy-cache')).toBe('MISS');
    await waitFor(async () => (await originCount(route)) === 1);

    for (let i = 0; i < 3; i++) {
      const res = await get(proxy.url + path);
      expect(res.headers.get('x-proxy-cache')).toBe('HIT');
      expect(res.body).toBe(first.body);
    }
    // A client's own revalidation is answered by nginx from the stored ETag.
    const conditional = await get(proxy.url + path, {
      headers: { 'if-none-match': first.headers.get('etag')! },
    });
    expect(conditional.status).toBe(304);
    expect(conditional.headers.get('x-proxy-cache')).toBe('HIT');

    const log = await logOf(path, 5);
    expect(log.map((l) => l.upstream_status)).toEqual(['200', '', '', '', '']);
    expect(await originCount(route)).toBe(1);
  });
});
