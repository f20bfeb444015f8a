import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './ports.js';
import { binary } from './programs.js';
import { redisAnswers } from './shared-redis.js';
import { waitFor } from './wait.js';

const waitForPing = (port: number, timeoutMs = 10_000): Promise<void> =>
  waitFor(
    () => redisAnswers(`redis://127.0.0.1:${port}`),
    timeoutMs,
    `redis-server on ${port} answering`,
    50,
  );

export type LocalCluster = { nodes: string; stop: () => Promise<void> };

/**
 * Starts a Redis Cluster of `masters` masters and no replicas from the distribution's
 * `redis-server` on free loopback ports (in a temp dir, nothing saved), joined with
 * `redis-cli --cluster create`. Only this test's processes: the shared Redis is never touched.
 *
 * @returns the seed list for `REDIS_CLUSTER_NODES`, and `stop()` which kills the nodes.
 */
export async function startLocalCluster(masters = 3): Promise<LocalCluster> {
  const dir = mkdtempSync(join(tmpdir(), 'snsgw-cluster-'));
  const ports = await Promise.all(Array.from({ length: masters }, () => freePort()));
  const procs: ChildProcess[] = ports.map((port) =>
    spawn(
      binary('redis-server'),
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        join(dir, `nodes-${port}.conf`),
        '--cluster-node-timeout',
        '2000',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
      ],
      { stdio: 'ignore' },
    ),
  );
  const stop = async () => {
    for (const p of procs) p.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await Promise.all(ports.map((p) => waitForPing(p)));
    const create = spawnSync(
      binary('redis-cli'),
      [
        '--cluster',
        'create',
        ...ports.map((p) => `127.0.0.1:${p}`),
        '--cluster-replicas',
        '0',
        '--cluster-yes',
      ],
      { encoding: 'utf8', timeout: 30_000 },
    );
    if (create.status !== 0)
      throw new Error(`redis-cli --cluster create failed: ${create.stdout}${create.stderr}`);
    // Wait until every node agrees the cluster is up.
    const clusterOk = (port: number) =>
      spawnSync(binary('redis-cli'), ['-p', String(port), 'cluster', 'info'], {
        encoding: 'utf8',
      }).stdout.includes('cluster_state:ok');
    await waitFor(() => ports.every(clusterOk), 15_000, 'cluster_state:ok on every node', 100);
    return { nodes: ports.map((p) => `127.0.0.1:${p}`).join(','), stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
