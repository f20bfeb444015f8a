import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import type { ReplyDecoder } from '../rpc/client.js';
import { fromWireError, RpcCallError } from '../rpc/envelope.js';
import type {
  ThreadData,
  ThreadParts,
  ThreadReply,
  ThreadRequest,
  ThreadResults,
} from './discovery-thread.js';

/**
 * Starts ./discovery-thread: the compiled `.js`, or a `.ts` via tsx's loader registered in the
 * thread itself (on Node 20, `--import tsx` in `execArgv` hooks the main thread only).
 */
function startThread(heapMb: number): Worker {
  const resourceLimits = { maxOldGenerationSizeMb: heapMb, maxYoungGenerationSizeMb: 16 };
  const workerData: ThreadData = { heapMb };
  const here = new URL(import.meta.url);
  if (!here.pathname.endsWith('.ts')) {
    return new Worker(new URL('./discovery-thread.js', here), { resourceLimits, workerData });
  }
  const entry = new URL('./discovery-thread.ts', here).href;
  const tsx = import.meta.resolve('tsx/esm/api');
  const boot = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`;
  return new Worker(boot, { eval: true, resourceLimits, workerData });
}

/** Budget of one decode thread. */
export type DecodeBudget = {
  /** MiB (`resourceLimits.maxOldGenerationSizeMb`). */
  readonly heapMb: number;
  /** Ms one task may take once the thread has started on it. */
  readonly taskMs: number;
};

type Task = {
  seq: number;
  resolve: (reply: ThreadReply) => void;
  reject: (err: Error) => void;
  /** Where the task's parts go (a streamed decode), in order, before its answer. */
  onPart?: (part: unknown) => void;
};

type TaskInput = ThreadRequest extends infer R
  ? R extends { seq: number }
    ? Omit<R, 'seq'>
    : never
  : never;

/**
 * A decode thread from the main thread: started on first use (or {@link warm}), unref'd while idle, restarted
 * after a death; tasks in order, bodies transferred. A task past its heap or time budget fails
 * unretried and the thread is abandoned, not awaited: `terminate()` cannot stop a `JSON.parse`
 * (docs/design.md, "Replies from an RPC").
 */
export class DecodeThread {
  private worker: Worker | undefined;
  private seq = 0;
  /** Tasks sent to the current worker, the one in progress first. */
  private readonly queue: Task[] = [];
  private headTimer: NodeJS.Timeout | undefined;
  /** Loaded: budgets run from then, not from start-up. */
  private ready = false;
  /** Threads left to end by themselves. */
  private readonly abandoned = new Set<Worker>();

  constructor(private readonly budget: DecodeBudget) {}

  /**
   * Starts the thread now (when none runs), so it boots before the reply it is for arrives: at the
   * worker's start for the configured endpoint's lane, while a call is under way for the others.
   */
  warm(): void {
    this.ensure();
  }

  /**
   * Sends a task (the body's memory moves to the thread) and waits for its result; on abort,
   * rejects at once and drops the later answer. A decode that hands parts over before its answer
   * calls `onPart` with each, in order, while the task is waited on (none once it was aborted);
   * `onPart` must not throw.
   *
   * @throws RpcCallError as decoders throw it; final past the budget, retryable for tasks queued
   *   behind it; Error when the thread dies or is closed.
   */
  async run<K extends TaskInput['kind']>(
    task: Extract<TaskInput, { kind: K }>,
    signal?: AbortSignal,
    onPart?: (part: ThreadParts[K]) => void,
  ): Promise<ThreadResults[K]> {
    const reply = await this.send(task, signal, onPart as ((part: unknown) => void) | undefined);
    if ('failed' in reply) throw fromWireError(reply.failed);
    if (!('result' in reply)) throw new Error('unexpected message from the decode thread');
    return reply.result as ThreadResults[K];
  }

  /** A {@link ReplyDecoder} of the JSON-RPC `result`, decoded in this thread. */
  envelope<T>(signal?: AbortSignal): ReplyDecoder<T> {
    return async (body, { method, id }) =>
      (await this.run(
        { kind: 'envelope', method, id, body: DecodeThread.transferable(body) },
        signal,
      )) as T;
  }

  /** Transfers `body` if it owns its memory; a slice of Node's shared pool is copied. */
  static transferable(body: Uint8Array): ArrayBuffer {
    const own =
      body.buffer instanceof ArrayBuffer &&
      body.byteOffset === 0 &&
      body.byteLength === body.buffer.byteLength;
    return (own ? body : new Uint8Array(body)).buffer as ArrayBuffer;
  }

  /**
   * Terminates the thread (waiting tasks fail) and resolves once every thread started, abandoned
   * ones included, has exited: `process.exit()` waits for live threads without running timers.
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
        // Only the reply being decoded was too big; those behind it are not at fault.
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

  private send(
    task: TaskInput,
    signal?: AbortSignal,
    onPart?: (part: unknown) => void,
  ): Promise<ThreadReply> {
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
        onPart,
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
        // Never reached the thread: no answer will come, so it must not hold the head.
        const index = this.queue.findIndex((t) => t.seq === seq);
        if (index >= 0) this.queue.splice(index, 1);
        if (index === 0) this.afterHeadChange(worker);
        done();
        reject(err instanceof Error ? err : new Error(String(err)));
      }
    });
  }

  /** A reply from `worker`, for the head task. */
  private settle(worker: Worker, reply: ThreadReply): void {
    if (worker !== this.worker) return;
    if ('ready' in reply) {
      this.ready = true;
      if (this.queue.length > 0) this.armHead();
      return;
    }
    if ('part' in reply) {
      // Not an answer: the task goes on, its budget with it.
      this.queue.find((t) => t.seq === reply.seq)?.onPart?.(reply.part);
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

  /** Gives the head task `taskMs` from now (or from load); past it, the thread is abandoned. */
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
      this.abandoned.add(worker);
      worker.once('exit', () => this.abandoned.delete(worker));
      void worker.terminate();
    }, this.budget.taskMs);
    this.headTimer.unref();
  }

  /** `worker` is gone: its tasks fail (head with `error(true)`); the next starts a thread. */
  private lost(worker: Worker, error: (head: boolean) => Error): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    clearTimeout(this.headTimer);
    this.headTimer = undefined;
    const tasks = this.queue.splice(0);
    tasks.forEach((task, i) => task.reject(error(i === 0)));
  }
}
