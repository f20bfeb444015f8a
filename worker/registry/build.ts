import { setTimeout as sleep } from 'node:timers/promises';
import { Queue, Worker, type Job } from 'bullmq';
import type { Logger } from 'pino';
import type { RegistryIndex } from '../../src/core/cache/registry-index.js';
import type { FollowStatus } from '../../src/core/cache/follow-status.js';
import type { RedisClient } from '../../src/core/redis.js';
import type { RpcEndpoint } from '../../src/core/rpc/endpoint.js';
import type { CreditBudget } from '../../src/core/rpc/budget.js';
import type { SlotClock } from '../../src/core/rpc/slot.js';
import { REVERSE_LOOKUP_CLASS, toBase58 } from '../../src/core/sns/pda.js';
import { RpcCallError } from '../rpc/envelope.js';
import { NAME_PROGRAM } from '../follow/name-program.js';
import { HEADER_LEN } from '../sns/discovery-decode.js';
import type { DiscoveryLane } from '../sns/subdomain-discovery.js';
import { namesPage, pageOf, reversesPage, type Page } from './pages.js';

/** BullMQ queue of the index's bootstrap pieces (`<prefix>:registry-build:*`). */
const REGISTRY_BUILD_QUEUE = 'registry-build';

/**
 * The shards of a build: the reverse records whose parent key starts with each byte (`00`..`ff`).
 * Shard `00` also holds every top-level name's reverse record (parent all zeros): it is read with
 * a third filter, the subdomain text's leading NUL at byte 100, which no top-level text has. A
 * record made by hand or by an old tool may lack that NUL, and `findSubdomains` lists it all the
 * same: shard `00` also reads the name accounts of no class under parents starting with byte 0
 * ({@link namesFilters}) and the reverse records derived from them.
 */
export const SHARDS: readonly string[] = Array.from({ length: 256 }, (_, i) =>
  i.toString(16).padStart(2, '0'),
);

/** Reverse-text bytes read inline by a piece; longer texts are completed by a read of their own. */
const PIECE_TEXT_BYTES = 64;
/** The pieces' `dataSlice`: the parent, then up to the text's first {@link PIECE_TEXT_BYTES} bytes. */
const PIECE_SLICE = Object.freeze({ offset: 0, length: HEADER_LEN + 4 + PIECE_TEXT_BYTES });
/** Accounts per `getProgramAccountsV2` page (the providers' most is 10,000). */
const PAGE_LIMIT = 10_000;
/** Tries of a piece (with exponential back-off from {@link PIECE_BACKOFF_MS}). */
const PIECE_ATTEMPTS = 12;
const PIECE_BACKOFF_MS = 2_000;
/**
 * Longest a piece stands aside, before each page, while refresh jobs wait to be taken: the build
 * is background work and yields to the refreshes that users wait on, but is never stopped for good.
 */
const PIECE_YIELD_MS = 5_000;
/** How often a piece standing aside looks again at the refresh jobs waiting, in ms. */
const PIECE_YIELD_POLL_MS = 100;

export type PieceJob = { run: number; shard: string };

export type BuildDeps = {
  index: RegistryIndex;
  lane: DiscoveryLane;
  endpoint: RpcEndpoint;
  slots: Pick<SlotClock, 'observe'>;
  /** Bootstraps are proactive spend: past the soft threshold they wait (docs/design.md, "Budget"). */
  budget?: Pick<CreditBudget, 'state'>;
  /** The follow status: a piece is read only while the stream is whole-program and healthy. */
  followStatus: () => Promise<FollowStatus | null>;
  /**
   * Refresh jobs of the configured endpoint waiting to be taken (the refresh queue's `wait` and
   * `prioritized` counts): while some wait, a piece reads no page ({@link PIECE_YIELD_MS}).
   */
  refreshWaiting?: () => Promise<number>;
  logger: Logger;
  now?: () => number;
};

/**
 * Waits, up to {@link PIECE_YIELD_MS}, while refresh jobs wait to be taken: the build's scans and a
 * refresh's share the provider's rate limit and this process, and a user waits on the refresh.
 * A count that cannot be read does not hold the build.
 */
async function standAside(deps: BuildDeps): Promise<void> {
  const waiting = deps.refreshWaiting;
  if (!waiting) return;
  const until = Date.now() + PIECE_YIELD_MS;
  while (Date.now() < until && (await waiting().catch(() => 0)) > 0) {
    await sleep(PIECE_YIELD_POLL_MS);
  }
}

/** Whether the provider refused the method (-32601): V2 pagination is then not offered. */
const refused = (err: unknown): boolean =>
  err instanceof RpcCallError && /JSON-RPC error -32601 /.test(err.message);

/** The filters of a shard's reverse records. */
function shardFilters(shard: string): object[] {
  const byte = Number.parseInt(shard, 16);
  const filters: object[] = [
    { memcmp: { offset: 64, bytes: toBase58(REVERSE_LOOKUP_CLASS) } },
    { memcmp: { offset: 0, bytes: toBase58(Uint8Array.of(byte)) } },
  ];
  if (byte === 0)
    filters.push({ memcmp: { offset: HEADER_LEN + 4, bytes: toBase58(Uint8Array.of(0)) } });
  return filters;
}

/**
 * The filters of shard `00`'s second pass: name accounts whose parent starts with byte 0 and whose
 * class is none (a subdomain's; reverse records, top-level ones included, have the reverse class).
 */
function namesFilters(): object[] {
  return [
    { memcmp: { offset: 0, bytes: toBase58(Uint8Array.of(0)) } },
    { memcmp: { offset: 64, bytes: toBase58(new Uint8Array(32)) } },
  ];
}

/** The pieces' `dataSlice` of name accounts: the parent and the owner. */
const NAMES_SLICE = Object.freeze({ offset: 0, length: 64 });

/** What one pass of a piece reads: reverse records by their parent, or name accounts. */
type Pass = { kind: 'reverses' | 'names'; filters: object[]; dataSlice: object };

/** The passes of a shard's piece, in order; the last one's last page marks the shard done. */
function piecePasses(shard: string): Pass[] {
  const passes: Pass[] = [
    { kind: 'reverses', filters: shardFilters(shard), dataSlice: PIECE_SLICE },
  ];
  if (Number.parseInt(shard, 16) === 0) {
    passes.push({ kind: 'names', filters: namesFilters(), dataSlice: NAMES_SLICE });
  }
  return passes;
}

/**
 * Reads one shard of build `run` and writes it, page by page (docs/design.md, "The registry
 * index"): `getProgramAccountsV2` pages where the provider has it, else one `getProgramAccounts`;
 * each page at its context slot, the owners of its subdomains read at that slot or later. A piece
 * already done, or of a build no longer current, returns at once.
 *
 * @returns the members written, or null when skipped.
 * @throws when the stream is not followed, the budget is past its soft threshold, or a read fails
 *   (BullMQ retries with back-off).
 */
async function buildPiece(deps: BuildDeps, job: PieceJob): Promise<number | null> {
  const { index } = deps;
  const state = await index.state();
  if (state.run !== job.run || state.status !== 'building') return null;
  if (await index.shardDone(job.run, job.shard)) return null;
  if ((deps.budget?.state() ?? 'normal') !== 'normal') {
    throw new Error('registry piece: the credit budget is past its soft threshold');
  }
  const status = await deps.followStatus();
  const now = (deps.now ?? Date.now)();
  if (!status || status.mode !== 'program' || now >= status.healthyUntil) {
    throw new Error('registry piece: the stream is not followed whole; waiting');
  }
  const passes = piecePasses(job.shard);
  const reading = { v2: true, total: 0 };
  for (const [i, pass] of passes.entries()) {
    const shard = i === passes.length - 1 ? job.shard : undefined;
    if ((await readPass(deps, job.run, shard, pass, reading)) === null) return null;
  }
  return reading.total;
}

/**
 * Reads one pass of a piece, page by page, and writes each page; `shard` is marked done with the
 * last page (undefined: a pass follows). `reading.v2` is false once the provider refused
 * `getProgramAccountsV2`; `reading.total` counts the members written.
 *
 * @returns null when the build is no longer current.
 */
async function readPass(
  deps: BuildDeps,
  run: number,
  shard: string | undefined,
  pass: Pass,
  reading: { v2: boolean; total: number },
): Promise<number | null> {
  const { index, lane, endpoint } = deps;
  const config = {
    encoding: 'base64',
    commitment: 'confirmed',
    withContext: true,
    filters: pass.filters,
    dataSlice: pass.dataSlice,
  };
  let paginationKey: string | null = null;
  let minContextSlot: number | undefined;
  for (;;) {
    let page: Page;
    await standAside(deps);
    const params = {
      ...config,
      ...(minContextSlot === undefined ? {} : { minContextSlot }),
    };
    if (reading.v2) {
      try {
        const result = await lane.rpc.call<unknown>(
          endpoint,
          'getProgramAccountsV2',
          [
            NAME_PROGRAM,
            { ...params, limit: PAGE_LIMIT, ...(paginationKey ? { paginationKey } : {}) },
          ],
          { decode: lane.thread.envelope<unknown>() },
        );
        page = pageOf(result, true);
      } catch (err) {
        if (!refused(err) || paginationKey !== null) throw err;
        reading.v2 = false;
        continue;
      }
    } else {
      const result = await lane.rpc.call<unknown>(
        endpoint,
        'getProgramAccounts',
        [NAME_PROGRAM, params],
        {
          decode: lane.thread.envelope<unknown>(),
        },
      );
      page = pageOf(result, false);
    }
    deps.slots.observe(page.slot);
    minContextSlot = Math.max(minContextSlot ?? page.slot, page.slot);
    const { members, ownersSlot } =
      pass.kind === 'reverses'
        ? await reversesPage(lane, endpoint, page)
        : await namesPage(lane, endpoint, page);
    const last = page.next === null;
    const written = await index.writePiece(
      run,
      last ? shard : undefined,
      page.slot,
      ownersSlot,
      members,
    );
    if (written === null) return null;
    reading.total += written.written;
    if (last) return reading.total;
    paginationKey = page.next;
  }
}

/** The queue of pieces. */
export function createRegistryBuildQueue(connection: RedisClient, prefix: string): Queue<PieceJob> {
  return new Queue<PieceJob>(REGISTRY_BUILD_QUEUE, { connection, prefix });
}

/**
 * The BullMQ worker running pieces, one at a time (a bootstrap is paced, not raced), on a queue
 * and a connection of its own: a refresh job never waits behind a piece (docs/design.md, "The
 * registry index").
 */
export function createRegistryBuildWorker(
  connection: RedisClient,
  prefix: string,
  deps: BuildDeps,
  onError: (err: Error) => void,
): Worker<PieceJob> {
  const worker = new Worker<PieceJob>(
    REGISTRY_BUILD_QUEUE,
    async (job: Job<PieceJob>) => buildPiece(deps, job.data),
    { connection, prefix, concurrency: 1 },
  );
  worker.on('error', onError);
  return worker;
}

/**
 * Starts the index's build when none is under way or the index fell behind (`force`), and queues
 * every piece of the build under way: job ids are `<run>-<shard>`, so queueing again after a
 * restart adds only what is missing, and a piece done is skipped by its progress in Redis.
 *
 * @returns the build under way.
 */
export async function superviseBuild(
  index: RegistryIndex,
  queue: Queue<PieceJob>,
  opts: { status: FollowStatus | null; now?: number; logger: Logger },
): Promise<{ run: number; status: string }> {
  const now = opts.now ?? Date.now();
  const { status } = opts;
  const followed = status !== null && status.mode === 'program' && now < status.healthyUntil;
  let state = await index.state();
  // The stream missed something it could not heal since the build began: what it built may lack it.
  const behind =
    state.status === 'behind' ||
    ((state.status === 'complete' || state.status === 'building') &&
      status !== null &&
      status.epoch > state.startedAt);
  if (followed && (state.status === 'none' || behind)) {
    const { run, started } = await index.start(SHARDS.length, behind, now);
    if (started) opts.logger.info({ run, rebuild: behind }, 'registry: a build begins');
    state = await index.state();
  }
  if (state.status === 'building') {
    const done = new Set(await index.shardsDone(state.run));
    await queue.addBulk(
      SHARDS.filter((shard) => !done.has(shard)).map((shard) => ({
        name: 'piece',
        data: { run: state.run, shard },
        opts: {
          jobId: `${state.run}-${shard}`,
          attempts: PIECE_ATTEMPTS,
          backoff: { type: 'exponential', delay: PIECE_BACKOFF_MS },
          removeOnComplete: true,
          removeOnFail: true,
        },
      })),
    );
  }
  return { run: state.run, status: state.status };
}
