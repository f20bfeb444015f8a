/**
 * Every Redis key and channel the gateway names, in one place (as BullMQ's QueueKeys names its
 * own). All start with `QUEUE_PREFIX`, which BullMQ puts before its queue keys too, so one prefix
 * holds everything of one deployment; on Redis Cluster it is a hash tag (`{sns}`), so every key
 * lives in one slot, as the Lua scripts and BullMQ's multi-key commands need.
 *
 * Key layout (docs/design.md, "The subdomain cache"):
 * - `<prefix>:entry:<endpoint id>:<parent>`: one cached answer of the configured endpoint, its
 *   head (a JSON string: slot, rev, fetchedAt, scanSlot, scannedAt, count, members).
 * - `<prefix>:entry-labels:<endpoint id>:<parent>`: its labels (a sorted set, `label\0account`).
 * - `<prefix>:entry-members:<endpoint id>:<parent>`: its name accounts (a hash, account ->
 *   `[label, owner, slot]`).
 * - `<prefix>:member-parents:<endpoint id>`: subdomain and reverse-record accounts -> the parent
 *   that lists them (a hash).
 * - `<prefix>:followed-parents:<endpoint id>`: the cached parents by last use (a sorted set, ms).
 * - `<prefix>:follow-status`: how the chain is followed (a JSON string, written by the worker).
 * - `<prefix>:follow-lease`: which worker owns the follow stream (a redlock resource).
 * - `<prefix>:follow-signature`: the newest name-program transaction the stream reported.
 * - `<prefix>:subdomains:<endpoint id>:<parent>`: one cached answer of a `?rpc=` override (a JSON
 *   string, labels and accounts inline).
 * - `<prefix>:override-entries:{by-expiry,sizes,bytes}`: the index of `?rpc=` entries and their
 *   byte budget.
 * - `<prefix>:hot-parents:<window>`: distinct clients per parent, one sorted set per window.
 * - `<prefix>:hot-parent-client-lists:<window>`: per parent, the clients counted in that window.
 * - `<prefix>:hot-parents-ahead:<window>`: the parents refreshed ahead in that window.
 * - `<prefix>:cold-miss-limit:<client>`: the per-client limit of new refreshes
 *   (@fastify/rate-limit's namespace).
 * - `<prefix>:readyz`: the readiness write probe.
 * - `<prefix>:rpc-credits:<UTC day>`: credits the configured endpoint spent that day, over all
 *   replicas (docs/design.md, "Budget").
 * - `<prefix>:registry:p:<parent id>`: the registry index's subdomains of one parent (a hash,
 *   subdomain name account -> `slot|owner|label`; docs/design.md, "The registry index").
 * - `<prefix>:registry:a:<2 characters>`: subdomain and reverse-record accounts of the index by
 *   their first characters -> the parent id (a name account) or `@` and its name account's first
 *   characters (a reverse record) (hashes).
 * - `<prefix>:registry:state`: the index's build (a hash: run, status, shards, times).
 * - `<prefix>:registry:shards:<run>`: the shards of build `run` done so far (a hash).
 * - `<prefix>:registry:journal`: what the stream saw during a build of accounts no piece wrote yet.
 * - `<prefix>:subdomain-refresh[-override]:*`, `<prefix>:hot-parent-scans:*`,
 *   `<prefix>:registry-build:*`: BullMQ's own keys of the queues.
 *
 * Channel: `<prefix>:db<N>:refresh-events`, the refresh events of the deployment on database N.
 * Keys live in the connection's database; pub/sub channels are global to a Redis server (and to a
 * cluster), so the channel names the database as well as the prefix (docs/design.md, "Redis
 * isolation"). No BullMQ key has that shape (theirs are `<prefix>:<queue>:<name>`).
 */
export type RedisKeys = ReturnType<typeof redisKeys>;

/** The key names under `prefix` (`QUEUE_PREFIX`, as the configuration hands it out). */
export function redisKeys(prefix: string) {
  const overrideIndex = `${prefix}:override-entries`;
  return Object.freeze({
    prefix,
    /**
     * One cached answer in one JSON string, labels and accounts inline: the layout of `?rpc=`
     * override entries.
     * The endpoint id is a hash (never the URL), the parent a normalized label. Everything before
     * the parent is {@link subdomainEntryPrefix}.
     */
    subdomainEntry: (endpointId: string, parent: string) =>
      `${prefix}:subdomains:${endpointId}:${parent}`,
    /**
     * The head of a configured endpoint's entry (JSON: slot, rev, fetchedAt, scanSlot, scannedAt,
     * count, members); the entry's labels and members live in the two keys below. Everything
     * before the parent is {@link entryPrefix}.
     */
    entryMeta: (endpointId: string, parent: string) => `${prefix}:entry:${endpointId}:${parent}`,
    /** Its labels: a sorted set, score 0, members `label + "\0" + account` (lex = answer order). */
    entryLabels: (endpointId: string, parent: string) =>
      `${prefix}:entry-labels:${endpointId}:${parent}`,
    /** Its name accounts: a hash, subdomain name account -> JSON `[label, owner, slot]`. */
    entryMembers: (endpointId: string, parent: string) =>
      `${prefix}:entry-members:${endpointId}:${parent}`,
    /** What the keys of {@link entryMeta}, {@link entryLabels}, {@link entryMembers} start with. */
    entryPrefix: (endpointId: string) =>
      Object.freeze({
        meta: `${prefix}:entry:${endpointId}:`,
        labels: `${prefix}:entry-labels:${endpointId}:`,
        members: `${prefix}:entry-members:${endpointId}:`,
      }),
    /**
     * The endpoint and parent of an {@link entryMeta} key, or null for any other key (an
     * override's {@link subdomainEntry}). Endpoint ids hold no colon; the parent is the rest.
     */
    entryOfMeta: (key: string): { endpointId: string; parent: string } | null => {
      const start = `${prefix}:entry:`;
      if (!key.startsWith(start)) return null;
      const rest = key.slice(start.length);
      const colon = rest.indexOf(':');
      return colon < 0 ? null : { endpointId: rest.slice(0, colon), parent: rest.slice(colon + 1) };
    },
    /**
     * A large scan's members and labels while its chunks are written (`token` is the write's own),
     * renamed to {@link entryMembers} and {@link entryLabels} by its last step; they expire on
     * their own when that step never comes.
     */
    entryStaging: (endpointId: string, token: string) =>
      Object.freeze({
        labels: `${prefix}:entry-staging:${endpointId}:${token}:labels`,
        members: `${prefix}:entry-staging:${endpointId}:${token}:members`,
      }),
    /**
     * A large scan's answer while its write runs: a JSON string of its sorted labels, `fetchedAt`
     * and `slot` (./cache/early-answers.ts), read by the API requests that wait on the scan; it
     * expires on its own soon after.
     */
    earlyAnswer: (endpointId: string, parent: string) =>
      `${prefix}:early-answer:${endpointId}:${parent}`,
    /**
     * Which parent lists an account: a hash, subdomain name account -> `<parent> <account>
     * <reverse record>`, its reverse record -> `<parent> <account>`.
     */
    memberParents: (endpointId: string) => `${prefix}:member-parents:${endpointId}`,
    /** The cached parents of an endpoint: a sorted set, parent -> last asked or scanned (ms). */
    followedParents: (endpointId: string) => `${prefix}:followed-parents:${endpointId}`,
    /**
     * What every key of the registry index starts with; its Lua scripts name the parents' hashes
     * and the accounts' buckets from it (one hash tag on a cluster, as every key here).
     */
    registryPrefix: `${prefix}:registry:`,
    /**
     * The registry index's subdomains of the parent whose name account's base58 key starts with
     * `parentId` (its first 16 characters): a hash, subdomain name account -> `slot|owner|label`
     * (the slot in base 36; owner or label empty while unknown, `-` once deleted).
     */
    registryParent: (parentId: string) => `${prefix}:registry:p:${parentId}`,
    /**
     * The index's accounts whose base58 key starts with `bucket` (2 characters): a hash, the next
     * 14 characters -> the parent id (a subdomain name account), or `<parent id> <first 16
     * characters of the subdomain name account>` (its reverse record): how a Delete finds its member.
     */
    registryAccounts: (bucket: string) => `${prefix}:registry:a:${bucket}`,
    /** The index's build: a hash (run, status, shards, startedAt, completedAt, minSlot, floor). */
    registryState: `${prefix}:registry:state`,
    /** The shards of build number `run` done: a hash, shard -> `slot count`. */
    registryShards: (run: number) => `${prefix}:registry:shards:${run}`,
    /**
     * Facts the stream saw during a build for accounts no piece had written: a hash, account ->
     * `slot|del` or `slot|<parent key>|<owner>`; deleted when the build completes.
     */
    registryJournal: `${prefix}:registry:journal`,
    /** How the worker follows the chain: JSON `{epoch, healthyUntil, mode}`. */
    followStatus: `${prefix}:follow-status`,
    /** The lease of the worker that owns the follow stream (a redlock resource). */
    followLease: `${prefix}:follow-lease`,
    /**
     * The newest name-program transaction the follow stream reported (its signature): a worker
     * taking the stream over heals the gap from it.
     */
    followSignature: `${prefix}:follow-signature`,
    /** What every entry of one endpoint starts with; the rest of the key is the parent. */
    subdomainEntryPrefix: (endpointId: string) => `${prefix}:subdomains:${endpointId}:`,
    /** The override entries by expiry time, their sizes, and the sum of those sizes. */
    overrideEntries: Object.freeze({
      byExpiry: `${overrideIndex}:by-expiry`,
      sizes: `${overrideIndex}:sizes`,
      bytes: `${overrideIndex}:bytes`,
    }),
    /** The sorted set of distinct clients per parent of window number `window` (time / length). */
    hotParents: (window: number) => `${prefix}:hot-parents:${window}`,
    /**
     * The hash of the clients counted per parent (space-separated, each once) in window number
     * `window`.
     */
    hotParentClients: (window: number) => `${prefix}:hot-parent-client-lists:${window}`,
    /** The set of parents refreshed ahead (uncharged) in window number `window`: `HOT_KEYS_TOP_N` at most. */
    hotParentsAhead: (window: number) => `${prefix}:hot-parents-ahead:${window}`,
    /** @fastify/rate-limit's `nameSpace`: the client's key follows it. */
    coldMissLimitNamespace: `${prefix}:cold-miss-limit:`,
    readinessProbe: `${prefix}:readyz`,
    /**
     * Credits the configured endpoint spent on UTC day `day` (`YYYY-MM-DD`), over all replicas: a
     * float written by INCRBYFLOAT, expiring two days after its last write.
     */
    rpcCredits: (day: string) => `${prefix}:rpc-credits:${day}`,
    /**
     * The same day's spend by account (docs/design.md, "Budget"): a hash of `proactive`, `pool`,
     * `reserve` and `client:<key>` / `network:<key>` to credits, expiring with the counter.
     */
    rpcCreditShares: (day: string) => `${prefix}:rpc-credit-shares:${day}`,
    /**
     * `1` while the configured endpoint `endpointId` is known to hold `parent`'s name account
     * (an existence check or a scan with subdomains found it); what lets a cold miss spend the
     * reserve.
     */
    parentExists: (endpointId: string, parent: string) =>
      `${prefix}:parent-exists:${endpointId}:${parent}`,
    /**
     * How many "entry written" refresh events were published (an integer, INCR before each
     * PUBLISH): an API process that received fewer than were counted lost one, and drops its
     * in-process copy (docs/design.md, "The subdomain cache").
     */
    refreshEventsSent: `${prefix}:refresh-events-sent`,
    /** The pub/sub channel of refresh events of the deployment on database `db` (0 on a cluster). */
    refreshEvents: (db: number) => `${prefix}:db${db}:refresh-events`,
  });
}
