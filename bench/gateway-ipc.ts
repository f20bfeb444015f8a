/**
 * The IPC side of a benchmark child, shared by bench/child.ts (every role, under `tsx`) and
 * bench/gateway-child.ts (the compiled gateway of `BENCH_CODE=dist`), so that both answer the
 * bench (bench/lib.ts `Child`) the same way. It loads nothing but Node's own modules: what
 * gateway-child.ts loads counts in the RSS it reports.
 */
import { writeFileSync } from 'node:fs';
import type { Session } from 'node:inspector/promises';
import type { Server } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';

/** What a child sends when ready: its port (servers), the simulator's URLs. */
export type ChildInfo = { port?: number; url?: string; wsUrl?: string };

/** What a child answers to `stats`. */
export type ChildStats = {
  /** The process's resident set size now, in bytes. */
  rss: number;
  /** The highest RSS the process has had since it started, in bytes. */
  maxRss: number;
  /** User plus system CPU time of the process so far, in microseconds. */
  cpuUs: number;
  /** The worst event-loop delay since the last `resetLoop` (or start), in milliseconds. */
  loopMaxMs: number;
  /** The 99th percentile of the event-loop delay over the same span, in milliseconds. */
  loopP99Ms: number;
};

/** A child's own commands: the answer to `cmd` with `args`; a rejection is sent as the error. */
export type Handler = (cmd: string, args: unknown) => Promise<unknown>;

/** A role without commands of its own. */
export const noCommands: Handler = async (cmd) => {
  throw new Error(`unknown command ${cmd}`);
};

const loop = monitorEventLoopDelay({ resolution: 5 });
loop.enable();
/** V8's CPU profiler of this process, for bench/profile.ts; connected on `profileStart` only. */
let profiler: Session | undefined;

function stats(): ChildStats {
  const cpu = process.cpuUsage();
  return {
    rss: process.memoryUsage().rss,
    // resourceUsage() gives it in kilobytes.
    maxRss: process.resourceUsage().maxRSS * 1024,
    cpuUs: cpu.user + cpu.system,
    loopMaxMs: loop.max / 1e6,
    loopP99Ms: loop.percentile(99) / 1e6,
  };
}

/**
 * Answers the bench's requests (`{ id, cmd, args }` over IPC, answered `{ id, result }` or
 * `{ id, error }`), then sends `{ ready }`. Every child answers `stats` (ChildStats),
 * `resetLoop`, `profileStart` and `profileStop` (a V8 CPU profile written to the path given as
 * args, which is the answer) and `stop` (awaits `close`, then exits 0); any other command goes to
 * `handle`.
 */
export function serve(ready: ChildInfo, handle: Handler, close: () => Promise<void>): void {
  process.on('message', (msg: { id: number; cmd: string; args: unknown }) => {
    const answer = async (): Promise<unknown> => {
      switch (msg.cmd) {
        case 'stats':
          return stats();
        case 'resetLoop':
          loop.reset();
          return null;
        case 'profileStart': {
          // Loaded here, not at start: the inspector is no part of what a child measures.
          const { Session } = await import('node:inspector/promises');
          profiler = new Session();
          profiler.connect();
          await profiler.post('Profiler.enable');
          await profiler.post('Profiler.start');
          return null;
        }
        case 'profileStop': {
          if (!profiler) throw new Error('profileStart first');
          const { profile } = await profiler.post('Profiler.stop');
          profiler.disconnect();
          profiler = undefined;
          writeFileSync(msg.args as string, JSON.stringify(profile));
          return msg.args;
        }
        case 'stop':
          await close();
          setImmediate(() => process.exit(0));
          return null;
        default:
          return handle(msg.cmd, msg.args);
      }
    };
    answer().then(
      (result) => process.send?.({ id: msg.id, result }),
      (err: unknown) => process.send?.({ id: msg.id, error: String(err) }),
    );
  });
  process.send?.({ ready });
}

/** The TCP port `server` listens on; throws if it listens on a pipe or not at all. */
export function portOf(server: Server): number {
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('not listening on TCP');
  return address.port;
}
