import { Worker } from 'node:worker_threads';
import { fromWireError } from '../rpc/envelope.js';
import type { Classified } from './discovery-decode.js';
import type { ThreadReply, ThreadRequest } from './discovery-thread.js';

/**
 * The discovery thread seen from the worker's main thread: one long-lived `node:worker_threads`
 * Worker per process, started on first use, `unref()`'d while idle (it never holds the process
 * open), started again on the next task if it dies, and terminated by {@link closeDiscoveryThread}.
 * Tasks are answered in order; a task's body is transferred to the thread, not copied.
 */

/**
 * Starts ./discovery-thread next to this module: the compiled `.js` as it is; a `.ts` source (tsx,
 * vitest) through tsx's loader, registered in the thread itself. (`execArgv: ['--import', 'tsx']`
 * is not enough: on Node 20, tsx's `--import` entry registers its hooks on the main thread only.)
 */
function startThread(): Worker {
  const here = new URL(import.meta.url);
  if (!here.pathname.endsWith('.ts')) return new Worker(new URL('./discovery-thread.js', here));
  const entry = new URL('./discovery-thread.ts', here).href;
  const tsx = import.meta.resolve('tsx/esm/api');
  const boot = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`;
  return new Worker(boot, { eval: true });
}

type Pending = { resolve: (reply: ThreadReply) => void; reject: (err: Error) => void };

class DiscoveryThread {
  private worker: Worker | undefined;
  private seq = 0;
  private readonly pending = new Map<number, Pending>();

  /** The running thread, started if there is none. */
  ensure(): Worker {
    if (this.worker) return this.worker;
    const worker = startThread();
    worker.unref();
    worker.on('message', (reply: ThreadReply) => {
      const task = this.pending.get(reply.seq);
      if (!task) return; // aborted meanwhile
      this.forget(reply.seq);
      task.resolve(reply);
    });
    worker.on('messageerror', (err) => {
      this.lost(worker, err);
      void worker.terminate();
    });
    worker.on('error', (err) => this.lost(worker, err));
    worker.on('exit', (code) =>
      this.lost(worker, new Error(`discovery thread exited with code ${code}`)),
    );
    this.worker = worker;
    return worker;
  }

  /**
   * Sends a task and waits for its reply. On abort the promise rejects with the signal's reason
   * at once; the thread's answer, when it comes, is dropped.
   */
  run(task: Omit<ThreadRequest, 'seq'>, signal?: AbortSignal): Promise<ThreadReply> {
    signal?.throwIfAborted();
    const worker = this.ensure();
    const seq = ++this.seq;
    return new Promise<ThreadReply>((resolve, reject) => {
      const onAbort = () => {
        this.forget(seq);
        reject(signal?.reason as Error);
      };
      const settled = () => signal?.removeEventListener('abort', onAbort);
      this.pending.set(seq, {
        resolve: (reply) => {
          settled();
          resolve(reply);
        },
        reject: (err) => {
          settled();
          reject(err);
        },
      });
      if (this.pending.size === 1) worker.ref();
      signal?.addEventListener('abort', onAbort, { once: true });
      try {
        worker.postMessage({ ...task, seq } satisfies ThreadRequest, [task.body]);
      } catch (err) {
        this.forget(seq);
        settled();
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  /** Terminates the thread; tasks still waiting fail. A later task starts a new thread. */
  async close(): Promise<void> {
    const worker = this.worker;
    if (!worker) return;
    this.lost(worker, new Error('discovery thread closed'));
    await worker.terminate();
  }

  private forget(seq: number): void {
    if (this.pending.delete(seq) && this.pending.size === 0) this.worker?.unref();
  }

  /** `worker` is gone (or going): its tasks fail, and the next task starts another. */
  private lost(worker: Worker, err: Error): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    const tasks = [...this.pending.values()];
    this.pending.clear();
    for (const task of tasks) task.reject(err);
  }
}

const thread = new DiscoveryThread();

/** Starts the discovery thread now, if it is not running, so it boots while a call is under way. */
export function warmDiscoveryThread(): void {
  thread.ensure();
}

/** Terminates the discovery thread (worker shutdown). */
export function closeDiscoveryThread(): Promise<void> {
  return thread.close();
}

/**
 * Classifies the body of a `getProgramAccounts` reply in the discovery thread
 * (./discovery-decode.ts). The body's memory moves to the thread: `body` is unusable afterwards.
 *
 * @throws RpcCallError, as on the main thread, for a body that is no JSON-RPC reply to `id`; the
 *   signal's reason on abort; an Error when the thread dies or is closed meanwhile.
 */
export async function classifyInThread(
  method: string,
  body: Buffer,
  id: number,
  parentKey: Uint8Array,
  signal?: AbortSignal,
): Promise<Classified<Error>> {
  // Only memory the body has to itself moves; a slice of a shared pool is copied (small bodies).
  const own =
    body.buffer instanceof ArrayBuffer &&
    body.byteOffset === 0 &&
    body.byteLength === body.buffer.byteLength;
  const bytes = own ? body : new Uint8Array(body);
  const reply = await thread.run(
    {
      method,
      id,
      body: bytes.buffer as ArrayBuffer,
      parentKey: new Uint8Array(parentKey),
    },
    signal,
  );
  if ('failed' in reply) throw fromWireError(reply.failed);
  const { classified } = reply;
  return classified.kind === 'listed'
    ? classified
    : { ...classified, error: fromWireError(classified.error) };
}
