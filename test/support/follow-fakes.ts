import { Registry } from 'prom-client';
import { createLogger } from '../../src/core/logger.js';
import { createMetrics } from '../../src/core/metrics.js';
import type { FollowRecord } from '../../src/core/cache/follow-status.js';
import { Deletions } from '../../worker/follow/deletions.js';
import { Follower, type FollowerDeps } from '../../worker/follow/follower.js';
import type { Lease } from '../../worker/follow/ownership.js';
import type { FollowRpc } from '../../worker/follow/rpc.js';
import { NAME_PROGRAM } from '../../worker/follow/name-program.js';
import { toBase58 } from '../../src/core/sns/pda.js';
import type {
  AccountNote,
  ApplyVerdict,
  Clock,
  FollowStore,
  Member,
  MemberChange,
} from '../../worker/follow/types.js';

/** A clock whose time moves only when told: timers run in order as it passes them. */
export class FakeClock implements Clock {
  private t = 1_700_000_000_000;
  private seq = 0;
  private timers: Array<{ at: number; seq: number; fn: () => void }> = [];
  now(): number {
    return this.t;
  }
  after(ms: number, fn: () => void): () => void {
    const timer = { at: this.t + ms, seq: this.seq++, fn };
    this.timers.push(timer);
    return () => {
      this.timers = this.timers.filter((x) => x !== timer);
    };
  }
  /** Moves time forward by `ms`, running each timer due on the way (and what its promises do). */
  async advance(ms: number): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      await settle();
      this.timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = this.timers[0];
      if (!next || next.at > end) break;
      this.timers.shift();
      this.t = Math.max(this.t, next.at);
      next.fn();
    }
    this.t = end;
    await settle();
  }
  get pending(): number {
    return this.timers.length;
  }
}

/** Lets every promise chain that is ready run. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
}

/**
 * The store as the plan describes it, in memory: per member slot guard (a change older than the
 * member's slot is ignored), the entry's slot raised to the highest change, member index.
 */
export class FakeStore implements FollowStore {
  readonly entries = new Map<
    string,
    { slot: number; rev: number; members: Map<string, { member: Member; slot: number }> }
  >();
  /** Tombstones: slot a member was removed at (the guard applies to re-adds too). */
  readonly removed = new Map<string, number>();
  readonly memberParents = new Map<string, { parent: string; subdomain: string }>();
  readonly calls: string[] = [];
  checked: Array<{ parent: string; at: number; slot: number | undefined; epoch: number }> = [];

  /** Stores an entry as a scan would: account -> [label, owner, reverse record (optional)]. */
  put(parent: string, slot: number, members: Record<string, readonly string[]>): void {
    const map = new Map<string, { member: Member; slot: number }>();
    for (const [account, [label = '', owner = '', reverse]] of Object.entries(members)) {
      map.set(account, { member: [label, owner], slot });
      this.memberParents.set(account, { parent, subdomain: account });
      if (reverse) this.memberParents.set(reverse, { parent, subdomain: account });
    }
    this.entries.set(parent, { slot, rev: 1, members: map });
  }

  labels(parent: string): string[] {
    return [...(this.entries.get(parent)?.members.values() ?? [])].map((m) => m.member[0]).sort();
  }

  async applyChanges(
    parent: string,
    changes: readonly MemberChange[],
    slot: number,
  ): Promise<ApplyVerdict> {
    this.calls.push(`apply ${parent} ${slot}`);
    const entry = this.entries.get(parent);
    if (!entry) return 'missing';
    let changed = false;
    for (const { account, reverse, member } of changes) {
      const current = entry.members.get(account);
      const floor = current?.slot ?? this.removed.get(`${parent} ${account}`) ?? -1;
      if (slot < floor) continue;
      if (member === null) {
        if (current) {
          entry.members.delete(account);
          this.removed.set(`${parent} ${account}`, slot);
          this.memberParents.delete(account);
          this.memberParents.delete(reverse);
          changed = true;
        }
        continue;
      }
      if (current?.member[0] !== member[0] || current.member[1] !== member[1]) changed = true;
      entry.members.set(account, { member, slot });
      this.memberParents.set(account, { parent, subdomain: account });
      this.memberParents.set(reverse, { parent, subdomain: account });
    }
    entry.slot = Math.max(entry.slot, slot);
    if (changed) entry.rev++;
    return changed ? 'written' : 'unchanged';
  }

  async member(parent: string, account: string) {
    const m = this.entries.get(parent)?.members.get(account);
    return m ? { label: m.member[0], owner: m.member[1], slot: m.slot } : undefined;
  }

  async members(parent: string) {
    const entry = this.entries.get(parent);
    if (!entry) return undefined;
    return new Map([...entry.members].map(([a, m]) => [a, m.member]));
  }

  async parentOfMember(account: string) {
    return this.memberParents.get(account);
  }

  async parentsOfMembers(accounts: readonly string[]) {
    this.calls.push(`parentsOfMembers ${accounts.length}`);
    return accounts.map((a) => this.memberParents.get(a));
  }

  /** When each parent was last asked for or written (the registry's scores). */
  readonly touched = new Map<string, number>();
  async followedParents(sinceMs?: number) {
    return [...this.entries.keys()].filter(
      (p) => sinceMs === undefined || (this.touched.get(p) ?? 0) >= sinceMs,
    );
  }

  /** Re-reads owed by parent (the highest slot marked). */
  readonly owed = new Map<string, number>();
  async markOwed(parent: string, slot: number) {
    this.calls.push(`owed ${parent} ${slot}`);
    if (!this.entries.has(parent)) return false;
    this.owed.set(parent, Math.max(this.owed.get(parent) ?? slot, slot));
    return true;
  }
  async markChecked(
    parent: string,
    at: number,
    slot: number,
    gone: readonly string[],
    epoch: number,
  ) {
    this.checked.push({ parent, at, slot, epoch });
    const entry = this.entries.get(parent);
    let dropped = 0;
    for (const account of gone) {
      const m = entry?.members.get(account);
      if (!m || m.slot > slot) continue;
      entry?.members.delete(account);
      dropped++;
    }
    return dropped;
  }
}

/** An RPC whose answers tests set, counting calls as credits would be. */
export class FakeRpc implements FollowRpc {
  readonly calls: string[] = [];
  txs = new Map<string, unknown[]>();
  sigs: Array<{ signature: string; slot: number; failed: boolean }> = [];
  accountsByKey = new Map<string, { owner: string; head: Buffer } | null>();
  replySlot: number | undefined = 100;
  failSignatures = false;

  /** `answers` are given one per call (the last repeats): null for a lagging node. */
  setTx(signature: string, ...answers: unknown[]): void {
    this.txs.set(signature, answers);
  }
  async slot() {
    this.calls.push('getSlot');
  }
  async transaction(signature: string) {
    this.calls.push(`getTransaction ${signature}`);
    const answers = this.txs.get(signature);
    if (!answers) return null;
    return answers.length > 1 ? answers.shift() : answers[0];
  }
  /** A provider that caps `limit` (a hostile or stingy one): pages of at most this many. */
  pageCap = Infinity;
  async signatures(opts: { until?: string; before?: string; limit: number }) {
    this.calls.push(
      `getSignaturesForAddress ${opts.until ?? ''} ${opts.limit}` +
        (opts.before === undefined ? '' : ` before ${opts.before}`),
    );
    if (this.failSignatures) throw new Error('refused');
    let from = 0;
    if (opts.before !== undefined) {
      from = this.sigs.findIndex((s) => s.signature === opts.before) + 1;
      if (from === 0) return [];
    }
    const out: typeof this.sigs = [];
    for (const s of this.sigs.slice(from)) {
      if (s.signature === opts.until) break;
      out.push(s);
    }
    return out.slice(0, Math.min(opts.limit, this.pageCap));
  }
  async accounts(keys: readonly string[]) {
    this.calls.push(`getMultipleAccounts ${keys.length}`);
    return { slot: this.replySlot, accounts: keys.map((k) => this.accountsByKey.get(k) ?? null) };
  }
  count(method: string): number {
    return this.calls.filter((c) => c.startsWith(method)).length;
  }
}

/** A slot clock that believes slots up to `ceiling`. */
export const trustingSlots = (ceiling = 1_000_000) => ({
  trusts: (slot: unknown): slot is number =>
    typeof slot === 'number' && Number.isSafeInteger(slot) && slot >= 0 && slot <= ceiling,
  ceiling: () => ceiling,
  newest: ceiling - 10,
});

export const quietDeps = () => ({
  metrics: createMetrics(new Registry()),
  logger: createLogger('silent'),
});

type FollowerHooks = Parameters<FollowerDeps['connect']>[0];

/**
 * A follower on fakes (clock, store, RPC, lease always granted, a socket whose frames the test
 * sends): what test files drive the follower with. `statuses` collects every status written;
 * `confirm` answers every subscription sent; `reconnect` drops the socket and opens another,
 * `logs` signatures arriving on it; `reopen` does so without confirming; `logs` sends one logs
 * notification, `account` one program notification; `reconnects` counts the reconnects the
 * follower asked of its socket.
 */
export function fakeFollower(opts: {
  store?: FakeStore;
  rpc?: FakeRpc;
  clock?: FakeClock;
  stored?: FollowRecord;
  deps?: Partial<FollowerDeps>;
}) {
  const clock = opts.clock ?? new FakeClock();
  const store = opts.store ?? new FakeStore();
  const rpc = opts.rpc ?? new FakeRpc();
  const statuses: FollowRecord[] = [];
  const sent: Array<{ id: number; method: string }> = [];
  const rereads: Array<[string, number | undefined]> = [];
  const changed: string[] = [];
  const subscriptions = new Map<string, number>();
  let reconnects = 0;
  let hooks: FollowerHooks | undefined;
  const follower = new Follower({
    store: () => store,
    rpc,
    clock,
    slots: trustingSlots(),
    ...quietDeps(),
    reread: (parent, slot) => rereads.push([parent, slot]),
    changed: (parent) => changed.push(parent),
    status: { read: async () => opts.stored, write: async (s) => void statuses.push(s) },
    locker: {
      acquire: async () => {
        const lease: Lease = { extend: async () => lease, release: async () => 1 };
        return lease;
      },
    },
    leaseResource: 'p:follow-lease',
    leaseMs: 1_500,
    freshMs: 60_000,
    checkCost: 1,
    scanCost: 10,
    hotParents: async () => [],
    connect: (h) => {
      hooks = h;
      return {
        start: () => h.onOpen((t) => sent.push(JSON.parse(t) as { id: number; method: string })),
        connected: true,
        reconnect: () => void reconnects++,
        close: async () => undefined,
      };
    },
    ...opts.deps,
  });
  const confirm = () => {
    for (const m of sent.splice(0)) {
      subscriptions.set(m.method, m.id);
      hooks?.onMessage(Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: m.id })));
    }
  };
  const account = (note: AccountNote) =>
    hooks?.onMessage(
      Buffer.from(
        JSON.stringify({
          jsonrpc: '2.0',
          method: 'programNotification',
          params: {
            subscription: subscriptions.get('programSubscribe'),
            result: {
              context: { slot: note.slot },
              value: {
                pubkey: note.pubkey,
                account: { data: [note.head?.toString('base64'), 'base64'] },
              },
            },
          },
        }),
      ),
    );
  const logs = (signature: string, slot = 95, lines: string[] = []) =>
    hooks?.onMessage(
      Buffer.from(
        JSON.stringify({
          jsonrpc: '2.0',
          method: 'logsNotification',
          params: {
            subscription: subscriptions.get('logsSubscribe'),
            result: { context: { slot }, value: { signature, err: null, logs: lines } },
          },
        }),
      ),
    );
  /** Opens the first socket (the lease is taken within a second) and confirms it. */
  const open = async () => {
    follower.start();
    await clock.advance(1_000);
    confirm();
  };
  const reopen = () => {
    hooks?.onClose();
    hooks?.onOpen((t) => sent.push(JSON.parse(t) as { id: number; method: string }));
  };
  const reconnect = (signatures: string[]) => {
    reopen();
    confirm();
    for (const signature of signatures) logs(signature);
  };
  return {
    follower,
    clock,
    store,
    rpc,
    statuses,
    sent,
    rereads,
    changed,
    confirm,
    open,
    logs,
    account,
    reopen,
    reconnect,
    reconnects: () => reconnects,
    hooks: () => hooks,
  };
}

/**
 * A `getTransaction` result of the name program at `slot`: top-level instructions (tag, name
 * account) and inner ones under the first; tags as the program's (0 Create, 3 Delete, 4 Realloc).
 */
export function tx(
  slot: number,
  top: Array<[tag: number, account: string]>,
  inner: Array<[number, string]> = [],
) {
  const keys = [NAME_PROGRAM, 'payer111', ...top.map(([, a]) => a), ...inner.map(([, a]) => a)];
  const ix = (tag: number, account: string) => ({
    programIdIndex: 0,
    accounts: tag === 0 || tag === 4 ? [1, 1, keys.indexOf(account)] : [keys.indexOf(account), 1],
    data: toBase58(Buffer.from([tag, 1, 2, 3])),
  });
  return {
    slot,
    meta: {
      err: null,
      innerInstructions: [{ index: 0, instructions: inner.map(([t, a]) => ix(t, a)) }],
      loadedAddresses: { writable: [], readonly: [] },
    },
    transaction: { message: { accountKeys: keys, instructions: top.map(([t, a]) => ix(t, a)) } },
  };
}

/**
 * A `Deletions` unit on fakes (a store, an RPC, a clock, slots trusted), and what it reports:
 * the signatures it `lost`, the parents it `changed`.
 *
 * @param opts.rpc the RPC it reads transactions from (a new {@link FakeRpc} if absent).
 * @param opts.affordable its budget's say (always yes if absent).
 */
export function fakeDeletions(opts: { rpc?: FakeRpc; affordable?: () => boolean } = {}) {
  const store = new FakeStore();
  const rpc = opts.rpc ?? new FakeRpc();
  const clock = new FakeClock();
  const lost: string[] = [];
  const changed: string[] = [];
  const deletions = new Deletions({
    rpc,
    store,
    clock,
    slots: trustingSlots(),
    ...(opts.affordable ? { affordable: opts.affordable } : {}),
    reread: () => undefined,
    changed: (parent) => changed.push(parent),
    lost: (signature) => lost.push(signature),
    ...quietDeps(),
  });
  return { store, rpc, clock, lost, changed, deletions };
}

/** A logs notification of a transaction whose name-program logs say it deleted a name. */
export const deleteLogs = (signature: string, failed = false, slot = 60) => ({
  slot,
  signature,
  failed,
  logs: [`Program ${NAME_PROGRAM} invoke [1]`, 'Program log: Instruction: Delete Name'],
});
