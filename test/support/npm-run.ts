import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';

/** The repository root (this file is test/support/npm-run.ts). */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export type NpmRun = {
  readonly child: ChildProcess;
  /** Everything npm and the script wrote to stdout and stderr so far. */
  output(): string;
  /** Resolves with npm's exit code (null when killed by a signal) once it has exited. */
  readonly exited: Promise<number | null>;
};

/**
 * Runs `npm run <script>` as a user or a process manager does, in its own process group (the one
 * a terminal's Ctrl-C reaches: `process.kill(-child.pid, 'SIGINT')`), so that clean-up can reach
 * everything it left. SIGKILLed, group and all, when the test process exits first.
 *
 * @param env variables added to the test's environment.
 */
export function npmRun(script: string, env: Record<string, string>): NpmRun {
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

/** SIGKILLs the whole process group of {@link npmRun}: what a shell left behind included. */
export function killGroup(child: ChildProcess): void {
  try {
    process.kill(-(child.pid as number), 'SIGKILL');
  } catch {
    // already gone
  }
}

/** True when something accepts TCP connections on loopback `port`. */
export function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** True while process `pid` exists. */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** True while any process of process group `pgid` exists (an {@link npmRun}'s: its child's pid). */
export function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}
