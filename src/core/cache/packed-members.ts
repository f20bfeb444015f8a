import type { ScannedMember } from './scan-write.js';

/**
 * A scan's members as the entry's write sends them to Redis: one text for many members, made where
 * they are listed (the decode thread, for a scan's parts), so the worker's event loop neither
 * receives nor builds an object or a string a member (docs/design.md, "The subdomain cache").
 *
 * Each member is `account reverse bytes ["label","owner"\nlabel`: `bytes` is the label's UTF-8
 * length, which frames it (a label may hold any byte, spaces and newlines included); the JSON head
 * holds no raw newline (JSON.stringify escapes every one), so the first newline ends it. The
 * script that reads them (read_members, src/core/lua/includes/split-entry.lua) closes each head
 * with the slot of the write: `["label","owner",slot]` is the member's value.
 */
export type PackedMembers = {
  /** The members' texts, one after another. */
  readonly text: string;
  /** How many members. */
  readonly count: number;
};

/**
 * One member's text ({@link PackedMembers}).
 *
 * @param labelBytes `Buffer.byteLength(label)`, which the caller may need too.
 */
export function packMember(
  label: string,
  labelBytes: number,
  account: string,
  owner: string,
  reverse: string,
): string {
  const head = JSON.stringify([label, owner]);
  return `${account} ${reverse} ${labelBytes} ${head.slice(0, -1)}\n${label}`;
}

/** `members` as one {@link PackedMembers}. */
export function packMembers(members: readonly ScannedMember[]): PackedMembers {
  let text = '';
  for (const [label, account, owner, reverse] of members) {
    text += packMember(label, Buffer.byteLength(label), account, owner, reverse);
  }
  return { text, count: members.length };
}
