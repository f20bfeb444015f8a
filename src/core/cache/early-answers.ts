import type { RedisClient } from '../redis.js';
import type { RedisKeys } from '../redis-keys.js';
import { isSlot } from '../rpc/slot.js';
import type { CacheEntry } from './entry.js';

/**
 * A large scan's answer before its write (docs/design.md, "Early answers"): the worker lists the
 * scan's labels, sorted, under `RedisKeys.earlyAnswer` as soon as the decode is done, and tells
 * the requests waiting on the scan; they answer from it while the entry's chunks are still being
 * written. Never an entry: it is not patched, vouched for or kept in process, and it expires on
 * its own.
 */

/**
 * How long an early answer is kept: the requests it is for read it on its event, within a round
 * trip; any later read finds the entry written.
 */
export const EARLY_ANSWER_TTL_MS = 30_000;

/** What an early answer holds: a scan's labels, and the time and slot it was read at. */
export type EarlyAnswer = Pick<CacheEntry, 'labels' | 'fetchedAt' | 'slot'>;

/**
 * Lists `answer` as the early answer of (endpoint, parent), replacing any before it.
 *
 * @throws TypeError for a `fetchedAt` or `slot` that is not one (never stored); what Redis throws.
 */
export async function putEarlyAnswer(
  redis: RedisClient,
  keys: RedisKeys,
  endpointId: string,
  parent: string,
  answer: EarlyAnswer,
): Promise<void> {
  if (!isSlot(answer.fetchedAt))
    throw new TypeError(`fetchedAt ${String(answer.fetchedAt)} is not a time`);
  if (answer.slot !== undefined && !isSlot(answer.slot)) {
    throw new TypeError(`slot ${String(answer.slot)} is not a slot`);
  }
  const value = JSON.stringify({
    fetchedAt: answer.fetchedAt,
    slot: answer.slot,
    labels: answer.labels,
  });
  await redis.set(keys.earlyAnswer(endpointId, parent), value, 'PX', EARLY_ANSWER_TTL_MS);
}

/**
 * The early answer of (endpoint, parent), or null when there is none (expired, never written) or
 * it is not one (read as a miss: the request then waits for the entry).
 *
 * @throws what Redis throws.
 */
export async function getEarlyAnswer(
  redis: RedisClient,
  keys: RedisKeys,
  endpointId: string,
  parent: string,
): Promise<EarlyAnswer | null> {
  const text = await redis.get(keys.earlyAnswer(endpointId, parent));
  if (text === null) return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const { fetchedAt, slot, labels } = value as Record<string, unknown>;
  if (!isSlot(fetchedAt) || (slot !== undefined && !isSlot(slot))) return null;
  if (!Array.isArray(labels) || !labels.every((label) => typeof label === 'string')) return null;
  return { labels, fetchedAt, ...(slot === undefined ? {} : { slot }) };
}
