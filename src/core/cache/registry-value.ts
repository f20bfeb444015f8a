import { isSlot } from '../rpc/slot.js';
import { fromBase58, toBase58 } from '../sns/base58.js';

/*
 * A registry index member's stored value, `slot|owner|label` (./registry-index.ts says what each
 * part means; the Lua include src/core/lua/includes/registry-member.lua reads and writes the same).
 */

/** `|`, which ends a value's slot and its owner. */
const BAR = 0x7c;
/** `#`, which begins an owner stored as its 32 bytes. */
const RAW_OWNER = 0x23;
/** An owner's bytes in a value: its 32 bytes after {@link RAW_OWNER}. */
const RAW_OWNER_LEN = 33;

/**
 * An owner as the scripts store it: `#` and its 32 bytes (11 bytes fewer than its base58, which
 * keeps most parents' values within Redis's listpack bound; docs/design.md, "The registry
 * index"); `''` (unknown) and `-` (gone) as they are, and anything not 32 bytes of base58 as sent.
 */
export function ownerArg(owner: string): string | Buffer {
  if (owner === '' || owner === '-') return owner;
  let bytes: Buffer;
  try {
    bytes = fromBase58(owner);
  } catch {
    return owner;
  }
  return bytes.length === 32 ? Buffer.concat([Buffer.of(RAW_OWNER), bytes]) : owner;
}

/**
 * A stored value with its owner as stored: text (`''` unknown, `-` gone, or a base58 owner of an
 * older write), or the 32 bytes of an owner stored as bytes ({@link ownerText} gives its base58).
 */
export type RawValue = { slot: number; owner: string | Buffer; label: string };

/** A listed subdomain with its owner as stored (`RegistryIndex.listed`). */
export type ListedMember = { label: string; account: string; owner: string | Buffer };

/** An owner as {@link parseRaw} gives it, as base58 text (`''` and `-` as they are). */
export const ownerText = (owner: string | Buffer): string =>
  typeof owner === 'string' ? owner : toBase58(owner);

/**
 * A stored value `slot|owner|label`: slot in base 36; the owner `#` and 32 bytes (given as those
 * bytes: base58 costs a few microseconds each, which a list of thousands need not pay), or text up
 * to the next `|`; the label the rest (`+label`, `''` unknown, `-` gone).
 */
export function parseRaw(value: Buffer): RawValue | null {
  const a = value.indexOf(BAR);
  if (a < 0) return null;
  const digits = value.toString('latin1', 0, a);
  const slot = /^[0-9a-z]{1,11}$/.test(digits) ? Number.parseInt(digits, 36) : NaN;
  if (!isSlot(slot)) return null;
  const at = a + 1;
  if (value[at] === RAW_OWNER && value[at + RAW_OWNER_LEN] === BAR) {
    return {
      slot,
      owner: value.subarray(at + 1, at + RAW_OWNER_LEN),
      label: value.toString('utf8', at + RAW_OWNER_LEN + 1),
    };
  }
  const b = value.indexOf(BAR, at);
  if (b < 0) return null;
  return { slot, owner: value.toString('utf8', at, b), label: value.toString('utf8', b + 1) };
}

/** A value {@link parseRaw} gave, with its owner as base58 text. */
export const withOwnerText = (m: RawValue): { slot: number; owner: string; label: string } => ({
  slot: m.slot,
  owner: ownerText(m.owner),
  label: m.label,
});

/** A member as the floor reads it (src/core/lua/includes/registry-member.lua, `at_floor`). */
export function atFloor<M extends RawValue>(m: M, floor: number): M | RawValue {
  return Number.isSafeInteger(floor) && m.slot < floor ? { slot: floor, owner: '', label: '-' } : m;
}
