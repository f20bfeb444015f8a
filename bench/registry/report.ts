/** bench:registry's report: the targets table, the per-parent figures and the calls, as markdown. */
import { type BenchSetting, fmt, fmtSeconds, met, table } from '../lib.js';
import type { ChangeKind } from './chain-truth.js';
import type { ModeResult } from './measure.js';
import { ASK_CONCURRENCY, HOSTILE_CONCURRENCY, TARGETS, type RegistryOptions } from './options.js';
import { type Burst, type Calls, NO_CALLS, bytesOf, callsOf, credits } from './probes.js';

export type Machine = BenchSetting & { loadEnd: string };

export function report(
  m: Machine,
  started: Date,
  took: number,
  seedMs: number,
  accounts: number,
  results: ModeResult[],
  o: RegistryOptions,
): string {
  const cell = (r: ModeResult | undefined, f: (r: ModeResult) => string) => (r ? f(r) : 'not run');
  const registry = results.find((r) => r.mode === 'registry');
  const parents = results.find((r) => r.mode === 'parents');
  const maxShown = (r: ModeResult, kind: ChangeKind) => {
    const s = r.shown.find((x) => x.kind === kind);
    if (!s || s.never > 0 || s.ms.length === 0) return undefined;
    return Math.max(...s.ms);
  };
  const showCell = (r: ModeResult, kind: ChangeKind) => {
    const s = r.shown.find((x) => x.kind === kind);
    const ms = maxShown(r, kind);
    const never = s && s.never > 0 ? ` (${s.never} of ${s.never + s.ms.length} never)` : '';
    // A refused poll shows nothing: said, so a 429 is never read as a change not followed.
    const refused = s && s.refused > 0 ? `; ${s.refused} polls not answered 200` : '';
    return `${fmtSeconds(ms)}${never}${refused}`;
  };
  const gpa = (r: ModeResult) => callsOf(r.asked.calls, 'getProgramAccounts');
  const bytesPer = (r: ModeResult) => (r.redis.subdomains ? r.redis.bytes / r.redis.subdomains : 0);
  const statusText = (r: ModeResult) =>
    [...r.asked.statuses]
      .sort((a, b) => a[0] - b[0])
      .map(([s, n]) => `${n} × ${s === 0 ? 'no answer' : s}`)
      .join(', ');
  const row = (
    measure: string,
    target: string,
    f: (r: ModeResult) => string,
    ok?: (r: ModeResult) => boolean,
  ) => [
    measure,
    target,
    cell(registry, f),
    registry && ok ? met(ok(registry)) : '',
    cell(parents, f),
  ];
  const boot = (r: ModeResult) => r.bootstrap;
  const targets = table(
    ['measure', 'target', '`registry`', 'met', '`parents` (baseline)'],
    [
      row(
        '(a) bootstrap: credits at Helius prices',
        `≤ ${fmt.int(TARGETS.credits)}`,
        (r) => (boot(r) ? fmt.int(credits(boot(r)?.calls ?? NO_CALLS)) : 'no bootstrap'),
        (r) => credits(boot(r)?.calls ?? NO_CALLS) <= TARGETS.credits,
      ),
      row(
        '(a) bootstrap: the build (its state hash); from the worker start until `/readyz` says `serving`',
        '≤ 10 min',
        (r) =>
          boot(r) ? `${fmtSeconds(boot(r)?.buildMs)}; ${fmtSeconds(boot(r)?.ms)}` : 'no bootstrap',
        (r) => (boot(r)?.ms ?? Infinity) <= TARGETS.bootstrapMs,
      ),
      row(
        `(b) ${o.changes} changes while it is built: changed parents answering otherwise after it`,
        '0 lost',
        (r) =>
          `${r.changesLost} of ${r.changesChecked} wrong, ${r.changesRefused} not answered 200 ` +
          `(${r.changesDuringBuild} changes during the build)`,
        (r) => r.changesLost === 0 && r.changesRefused === 0,
      ),
      row(
        `(c) ${o.asked} parents never asked, one address: \`getProgramAccounts\` made`,
        '0',
        (r) => fmt.int(gpa(r)),
        (r) => gpa(r) === 0,
      ),
      row(
        '(c) answers 200 and identical to `findSubdomains`',
        `all ${o.asked}`,
        (r) => `${r.asked.bySdk} (${statusText(r)})`,
        (r) => r.asked.bySdk === r.asked.answers && r.asked.ok === r.asked.answers,
      ),
      row(
        '(c) latency p50 / p99',
        `p99 ≤ ${TARGETS.p99Ms} ms`,
        (r) => `${fmt.ms(r.asked.p50)} / ${fmt.ms(r.asked.p99)} ms`,
        (r) => r.asked.p99 <= TARGETS.p99Ms,
      ),
      ...(['create', 'transfer', 'delete'] as const).map((kind) =>
        row(
          `(d) subdomain ${kind === 'create' ? 'created' : kind === 'transfer' ? 'transferred (`/details` owner)' : 'deleted'} under ${o.watch} parents nobody asked: slowest`,
          '≤ 2 s',
          (r) => showCell(r, kind),
          (r) => (maxShown(r, kind) ?? Infinity) <= TARGETS.showMs,
        ),
      ),
      row(
        '(e) Redis bytes of the index per subdomain (`MEMORY USAGE`)',
        `≤ ${TARGETS.bytesPerSubdomain}`,
        (r) =>
          r.redis.keys === 0
            ? 'no index'
            : `${fmt.int(bytesPer(r))} (${fmt.bytes(r.redis.bytes)} in ${fmt.int(r.redis.keys)} keys, ${fmt.int(r.redis.subdomains)} subdomains)`,
        (r) => bytesPer(r) <= TARGETS.bytesPerSubdomain && r.redis.keys > 0,
      ),
      row(
        '(e) worker RSS, highest sampled',
        `≤ ${fmt.bytes(TARGETS.rssBytes)}`,
        (r) => fmt.bytes(r.workerRss),
        (r) => r.workerRss <= TARGETS.rssBytes,
      ),
    ],
  );
  const burstStatuses = (b: Burst) =>
    [...b.statuses]
      .sort((x, y) => x[0] - y[0])
      .map(([st, n]) => `${fmt.int(n)} × ${st === 0 ? 'no answer' : st}`)
      .join(', ');
  const callText = (calls: Calls) =>
    [...calls]
      .sort()
      .map(([k, v]) => `\`${k}\` ${fmt.int(v.calls)}`)
      .join(', ') || 'none';
  const perParentRow = (measure: string, f: (r: ModeResult) => string) => [
    measure,
    cell(registry, f),
    cell(parents, f),
  ];
  const burstRows = (name: string, pick: (r: ModeResult) => Burst) => [
    perParentRow(`${name}: answers`, (r) => {
      const b = pick(r);
      return `${burstStatuses(b)}; ${fmt.int(b.right)} right`;
    }),
    perParentRow(
      `${name}: latency p50 / p99`,
      (r) => `${fmt.ms(pick(r).p50)} / ${fmt.ms(pick(r).p99)} ms`,
    ),
    perParentRow(
      `${name}: calls the simulator answered (credits)`,
      (r) => `${callText(pick(r).calls)} (${fmt.int(credits(pick(r).calls))})`,
    ),
  ];
  const anyRun = registry ?? parents;
  const perParent = table(
    ['per parent', '`registry`', '`parents`'],
    [
      perParentRow(
        `long tail: ${o.asked} parents never asked, one address, ${ASK_CONCURRENCY} at a time (c)`,
        (r) =>
          `${statusText(r)}; \`getProgramAccounts\` ${fmt.int(gpa(r))}; p99 ${fmt.ms(r.asked.p99)} ms`,
      ),
      ...burstRows(
        `hot: ${fmt.int(anyRun?.hot.parents ?? 0)} cached parents × ${o.hotAsks}, one address, ${ASK_CONCURRENCY} at a time`,
        (r) => r.hot,
      ),
      ...burstRows(
        `hostile: ${fmt.int(o.hostile)} made-up parents, one address, ${HOSTILE_CONCURRENCY} at a time`,
        (r) => r.hostile,
      ),
    ],
  );
  const callRows = results.flatMap((r) => [
    ...(r.bootstrap
      ? [
          [
            `\`${r.mode}\` bootstrap`,
            [...r.bootstrap.calls]
              .sort()
              .map(([k, v]) => `\`${k}\` ${fmt.int(v.calls)}`)
              .join(', '),
            fmt.bytes(bytesOf(r.bootstrap.calls)),
          ],
        ]
      : []),
    [
      `\`${r.mode}\` ${o.asked} parents never asked`,
      [...r.asked.calls]
        .sort()
        .map(([k, v]) => `\`${k}\` ${fmt.int(v.calls)}`)
        .join(', ') || 'none',
      fmt.bytes(bytesOf(r.asked.calls)),
    ],
  ]);
  return [
    `Run ${started.toISOString()} at commit ${m.code} on ${m.cores} cores (${m.cpu}), Node ${m.node}, ` +
      `Redis ${m.redis} (database ${m.database}); load ${m.load} at the start, ${m.loadEnd} at the ` +
      `end (other work shared the machine); ${took.toFixed(0)} s in all. Command: ` +
      `\`${o.compiled ? 'BENCH_CODE=dist ' : ''}npm run bench:registry${o.args ? ` -- ${o.args}` : ''}\`: ` +
      (o.compiled
        ? 'the API and the worker run the compiled build (dist/, `npm run bench:build`) with plain `node`.'
        : 'the API and the worker run the TypeScript sources under `tsx`.'),
    '',
    `Registry on the simulator (seed ${o.seed}, ${fmt.int(accounts)} name-program accounts, written ` +
      `in ${fmtSeconds(seedMs)}): ${fmt.int(o.sizes.topLevel)} top-level names with reverse records, ` +
      `${fmt.int(o.sizes.subdomains)} subdomains under ${fmt.int(o.sizes.parents)} parents (one with ` +
      `${fmt.int(o.sizes.largest)}), ${fmt.int(o.sizes.records)} record accounts of other classes, ` +
      `${fmt.int(o.sizes.v1Records)} v1-style records, ${fmt.int(o.sizes.orphanReverses)} orphan ` +
      `reverse records. The simulator's HTTP reads ${o.lagMs} ms behind its websocket node; the ` +
      'API and the worker in processes of their own, `RPC_WS=on`, `CACHE_FRESH_SECONDS=60`, other ' +
      'settings as the other benches (bench/lib.ts `gatewayEnv`) and `TRUST_PROXY=1`; (b) and (d) ' +
      'ask each changed parent as a reader of its own (`X-Forwarded-For`), not from the one address ' +
      'of (c) and (f), whose cold-miss limit those spend; a change not shown within ' +
      `${o.showTimeoutMs / 1000} s counts as never. Each mode on a fresh copy of the registry and its own ` +
      `parents. (c): ${o.asked} parents (${Math.round(o.asked * 0.6)} with subdomains, the largest ` +
      `among them in the registry run, ${Math.round(o.asked * 0.3)} without, the rest made up), ` +
      `${ASK_CONCURRENCY} at a time from the bench's one address, each answer compared with the ` +
      "SDK's `findSubdomains` run against the simulator afterwards. Credits: Helius's prices " +
      '(`getProgramAccounts` and each `getProgramAccountsV2` page 10, every other call 1).',
    '',
    targets,
    '',
    'Per-parent figures, after (d): the long tail is (c); hot parents are the parents of (d), ' +
      'cached by then, asked again and again; hostile parents are made-up names, each new, from ' +
      "one address (a client walking names to make the gateway scan); 'right' counts answers " +
      'that list what the chain holds (`[]` for a made-up name).',
    '',
    perParent,
    '',
    table(['phase', 'calls the simulator answered', 'bytes'], callRows),
  ].join('\n');
}
