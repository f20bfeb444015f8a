import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import type { ReplyDecoder } from '../rpc/client.js';
import { fromWireError, RpcCallError } from '../rpc/envelope.js';
import type { ThreadReply, ThreadRequest, ThreadResults } from './discovery-thread.js';

/**
 * Starts ./discovery-thread next to this module: the compiled `.js` as it is; a `.ts` source (tsx,
 * vitest) through tsx's loader, registered in the thread itself. (`execArgv: ['--import', 'tsx']`
 * is not enough: on Node 20, tsx's `--import` entry registers its hooks on the main thread only.)
 */
function startThread(heapMb: number): Worker {
  const resourceLimits = { maxOldGenerationSizeMb: heapMb, maxYoungGenerationSizeMb: 16 };
  const here = new URL(import.meta.url);
  if (!here.pathname.endsWith('.ts')) {
    return new Worker(new URL('./discovery-thread.js', here), { resourceLimits });
  }
  const entry = new URL('./discovery-thread.ts', here).href;
  const tsx = import.meta.resolve('tsx/esm/api');
  const boot = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`;
  return new Worker(boot, { eval: true, resourceLimits });
}

/** The budget of one decode thread. */
export type DecodeBudget = {
  /** Heap of the thread, in MiB (`resourceLimits.maxOldGenerationSizeMb`). */
  readonly heapMb: number;
  /** Longest one task may take once the thread has started on it, in milliseconds. */
  readonly taskMs: number;
};

type Task = {
  seq: number;
  resolve: (reply: ThreadReply) => void;
  reject: (err: Error) => void;
};

/** A kind of task, without the fields the runner adds. */
type TaskInput = ThreadRequest extends infer R
  ? R extends { seq: number }
    ? Omit<R, 'seq'>
    : never
  : never;

/**
 * A decode thread seen from the worker's main thread: one `node:worker_threads` Worker, started on
 * first use, `unref()`'d while idle, restarted after a death, terminated by {@link close}; tasks
 * run in order, bodies transferred. Heap (`resourceLimits`) and time (`taskMs`) are bounded: a task
 * past either fails, not retried, and the thread is abandoned rather than awaited, since
 * `terminate()` cannot stop a `JSON.parse` under way (docs/design.md, "Replies from an RPC").
 */
export class DecodeThread {
  private worker: Worker | undefined;
  private seq = 0;
  /** Tasks sent to the current worker, oldest (the one it is working on) first. */
  private readonly queue: Task[] = [];
  private headTimer: NodeJS.Timeout | undefined;
  /** The current worker has loaded: budgets run from then, not from its start-up. */
  private ready = false;
  /** Threads left to end by themselves (a parse under way cannot be interrupted). */
  private readonly abandoned = new Set<Worker>();

  constructor(private readonly budget: DecodeBudget) {}

  /** Starts the thread now, if it is not running, so it boots while a call is under way. */
  warm(): void {
    this.ensure();
  }

  /**
   * Sends a task and waits for what it decodes. The body's memory moves to the thread: `body` is
   * unusable afterwards. On abort the promise rejects with the signal's reason at once; the
   * thread's answer, when it comes, is dropped.
   *
   * @throws RpcCallError as the decoders throw it; RpcCallError (not retried) past the budget,
   *   retryable for a task that was waiting behind it; Error when the thread dies or is closed.
   */
  async run<K extends TaskInput['kind']>(
    task: Extract<TaskInput, { kind: K }>,
    signal?: AbortSignal,
  ): Promise<ThreadResults[K]> {
    const reply = await this.send(task, signal);
    if ('failed' in reply) throw fromWireError(reply.failed);
    if ('ready' in reply) throw new Error('unexpected ready message');
    return reply.result as ThreadResults[K];
  }

  /** A reply decoder (../rpc/client.ts) giving the JSON-RPC `result`, decoded in this thread. */
  envelope<T>(signal?: AbortSignal): ReplyDecoder<T> {
    return async (body, { method, id }) =>
      (await this.run(
        { kind: 'envelope', method, id, body: DecodeThread.transferable(body) },
        signal,
      )) as T;
  }

  /**
   * Transfers `body` when it owns its memory; a slice of Node's shared pool (small bodies) is
   * copied, so the pool's other tenants are left alone.
   */
  static transferable(body: Uint8Array): ArrayBuffer {
    const own =
      body.buffer instanceof ArrayBuffer &&
      body.byteOffset === 0 &&
      body.byteLength === body.buffer.byteLength;
    return (own ? body : new Uint8Array(body)).buffer as ArrayBuffer;
  }

  /**
   * Terminates the thread; tasks still waiting fail. A later task starts a new thread. Resolves
   * once every thread this runner started has exited, abandoned ones included: `process.exit()`
   * waits for live threads without running any timer, so a shutdown must see them gone first
   * (or its own time-out fire while this is pending).
   */
  async close(): Promise<void> {
    const worker = this.worker;
    if (worker) {
      this.lost(worker, () => new Error('discovery thread closed'));
      await worker.terminate();
    }
    await Promise.all([...this.abandoned].map((w) => once(w, 'exit').catch(() => undefined)));
  }

  private ensure(): Worker {
    if (this.worker) return this.worker;
    const worker = startThread(this.budget.heapMb);
    this.ready = false;
    worker.unref();
    worker.on('message', (reply: ThreadReply) => this.settle(worker, reply));
    worker.on('messageerror', (err) => {
      this.lost(worker, () => err);
      void worker.terminate();
    });
    worker.on('error', (err: Error & { code?: string }) => {
      const oom = err.code === 'ERR_WORKER_OUT_OF_MEMORY';
      this.lost(worker, (head) => {
        if (!oom) return err;
        // The reply being decoded was too big; those waiting behind it were not at fault.
        return head
          ? new RpcCallError(
              `reply decode over ${this.budget.heapMb} MiB`,
              'http_error',
              false,
              undefined,
              {
                final: true,
              },
            )
          : new RpcCallError('decode thread replaced while this reply waited', 'http_error', true);
      });
    });
    worker.on('exit', (code) =>
      this.lost(worker, () => new Error(`discovery thread exited with code ${code}`)),
    );
    this.worker = worker;
    return worker;
  }

  private send(task: TaskInput, signal?: AbortSignal): Promise<ThreadReply> {
    signal?.throwIfAborted();
    const worker = this.ensure();
    const seq = ++this.seq;
    return new Promise<ThreadReply>((resolve, reject) => {
      const onAbort = () => {
        this.drop(seq);
        reject(signal?.reason as Error);
      };
      const done = () => signal?.removeEventListener('abort', onAbort);
      this.queue.push({
        seq,
        resolve: (reply) => {
          done();
          resolve(reply);
        },
        reject: (err) => {
          done();
          reject(err);
        },
      });
      if (this.queue.length === 1) {
        worker.ref();
        this.armHead();
      }
      signal?.addEventListener('abort', onAbort, { once: true });
      try {
        worker.postMessage({ ...task, seq }, [task.body]);
      } catch (err) {
        // Never reached the thread: no answer will come for it, so it must not hold the head.
        const index = this.queue.findIndex((t) => t.seq === seq);
        if (index >= 0) this.queue.splice(index, 1);
        if (index === 0) this.afterHeadChange(worker);
        done();
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  /** A reply from `worker`: it answers the task at the head of the queue. */
  private settle(worker: Worker, reply: ThreadReply): void {
    if (worker !== this.worker) return;
    if ('ready' in reply) {
      this.ready = true;
      if (this.queue.length > 0) this.armHead();
      return;
    }
    const index = this.queue.findIndex((t) => t.seq === reply.seq);
    const task = this.queue[index];
    if (index >= 0) this.queue.splice(index, 1);
    this.afterHeadChange(worker);
    task?.resolve(reply);
  }

  /** Forgets an aborted task; the thread still decodes it, so the head's timer runs on. */
  private drop(seq: number): void {
    const index = this.queue.findIndex((t) => t.seq === seq);
    if (index < 0) return;
    this.queue[index] = { seq, resolve: () => undefined, reject: () => undefined };
  }

  private afterHeadChange(worker: Worker): void {
    clearTimeout(this.headTimer);
    this.headTimer = undefined;
    if (this.queue.length === 0) worker.unref();
    else this.armHead();
  }

  /**
   * The task at the head has `taskMs` from now (or from when the thread has loaded); past it, the
   * thread is abandoned.
   */
  private armHead(): void {
    const worker = this.worker;
    if (!this.ready) return; // armed by the ready message
    clearTimeout(this.headTimer);
    this.headTimer = setTimeout(() => {
      if (!worker || worker !== this.worker) return;
      this.lost(worker, (head) =>
        head
          ? new RpcCallError(
              `reply decode over ${this.budget.taskMs} ms`,
              'http_error',
              false,
              undefined,
              {
                final: true,
              },
            )
          : new RpcCallError('decode thread replaced while this reply waited', 'http_error', true),
      );
      // Ends once the parse under way returns; only close() waits for it.
      this.abandoned.add(worker);
      worker.once('exit', () => this.abandoned.delete(worker));
      void worker.terminate();
    }, this.budget.taskMs);
    this.headTimer.unref();
  }

  /**
   * `worker` is gone (or abandoned): its tasks fail, the head one with `error(true)`, and the next
   * task starts another thread.
   */
  private lost(worker: Worker, error: (head: boolean) => Error): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    clearTimeout(this.headTimer);
    this.headTimer = undefined;
    const tasks = this.queue.splice(0);
    tasks.forEach((task, i) => task.reject(error(i === 0)));
  }
}
