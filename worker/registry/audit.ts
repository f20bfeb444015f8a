import type { Logger } from 'pino';
import {
  parentIdOf,
  type RegistryIndex,
  type RegistryOp,
} from '../../src/core/cache/registry-index.js';
import type { Metrics } from '../../src/core/metrics.js';
import type { RpcEndpoint } from '../../src/core/rpc/endpoint.js';
import { fromBase58, toBase58 } from '../../src/core/sns/pda.js';
import { discoverUnder, type DiscoveryLane } from '../sns/subdomain-discovery.js';
import type { FeedRpc } from './feed.js';

/** Parents audited per round, and how often a round runs (docs/design.md, "The registry index"). */
const AUDIT_PARENTS = 1;
export const AUDIT_EVERY_MS = 5 * 60_000;

/** One difference the audit found and repaired. */
export type AuditMismatch = {
  parentKey: string;
  account: string;
  /** `missing`: the chain lists it, the index not; `differs`: label or owner; `extra`: the reverse. */
  kind: 'missing' | 'differs' | 'extra';
};

export type AuditDeps = {
  index: Pick<RegistryIndex, 'sampleParents' | 'storedMembers' | 'apply'>;
  /** Reads name accounts' heads (the parent's key is their first 32 bytes). */
  rpc: FeedRpc;
  lane: DiscoveryLane;
  endpoint: RpcEndpoint;
  metrics: Pick<Metrics, 'registryAudits' | 'registryAuditMismatches'>;
  logger: Logger;
  /**
   * The listed subdomains of these parent ids changed by a repair: published as the feed's
   * changes are, so live updates and the API's copy of the index's answers see them.
   */
  changed: (parentIds: readonly string[]) => void;
};

/**
 * Audits one parent: reads it with the real `getProgramAccounts` (the per-parent discovery, at a
 * known slot) and compares with the index. A member the index holds at a later slot than the read
 * changed since and is not compared. Each difference is counted, logged and repaired as facts at
 * the read's slot (a label and an owner for one missing or differing; its label gone for one the
 * chain does not list), so the stream's later facts still win.
 *
 * @param parentKey the parent's name account, base58.
 * @returns the differences found (each repaired).
 * @throws RpcCallError when the read fails.
 */
export async function auditParent(deps: AuditDeps, parentKey: string): Promise<AuditMismatch[]> {
  const keyBytes = fromBase58(parentKey);
  const found = await discoverUnder(deps.lane, deps.endpoint, keyBytes);
  const slot = found.slot;
  deps.metrics.registryAudits.inc();
  if (slot === undefined) return [];
  const stored = await deps.index.storedMembers(parentKey);
  const mismatches: AuditMismatch[] = [];
  const ops: RegistryOp[] = [];
  for (const [account, [label, owner]] of Object.entries(found.members)) {
    const m = stored.get(account);
    if (m && m.slot > slot) continue;
    if (m && m.owner === owner && m.label === `+${label}`) continue;
    mismatches.push({ parentKey, account, kind: m ? 'differs' : 'missing' });
    ops.push(
      // The scan's decode thread found each member's reverse record: nothing to derive again.
      {
        op: 'label',
        slot,
        parentKey,
        account,
        reverse: found.reverses.get(account) as string,
        label,
      },
      { op: 'owner', slot, parentKey, account, owner },
    );
  }
  for (const [account, m] of stored) {
    const listed = m.owner !== '' && m.owner !== '-' && m.label.startsWith('+');
    if (!listed || m.slot > slot || found.members[account]) continue;
    mismatches.push({ parentKey, account, kind: 'extra' });
    ops.push({ op: 'unlist', slot, parentKey, account });
  }
  if (mismatches.length > 0) {
    const { changed } = await deps.index.apply(ops);
    if (changed.length > 0) deps.changed(changed);
    deps.metrics.registryAuditMismatches.inc(mismatches.length);
    for (const m of mismatches) {
      deps.logger.warn(
        { ...m, slot },
        'registry audit: the index differed from the chain; repaired',
      );
    }
  }
  return mismatches;
}

/**
 * One round of the audit: {@link AUDIT_PARENTS} parents of the index, taken in turn (every parent
 * comes round), each audited. A parent's whole key is read from one of its name accounts (its
 * first 32 bytes, one `getMultipleAccounts`): the index names parents by a prefix only.
 * @returns the differences found.
 */
export async function auditRound(
  deps: AuditDeps,
  parents = AUDIT_PARENTS,
): Promise<AuditMismatch[]> {
  const out: AuditMismatch[] = [];
  for (const { parentId, accounts } of await deps.index.sampleParents(parents)) {
    const { accounts: heads } = await deps.rpc.accounts(accounts);
    const parentKey = heads
      .map((h) => (h && h.head.length >= 32 ? toBase58(h.head.subarray(0, 32)) : undefined))
      .find((key) => key !== undefined && parentIdOf(key) === parentId);
    if (parentKey !== undefined) out.push(...(await auditParent(deps, parentKey)));
  }
  return out;
}
