import { describe, expect, it } from 'vitest';
import { classifyChange, subdomainKey } from '../worker/sns/change.js';
import { INLINE_TEXT_BYTES, SCAN_SLICE, SLICE_AT } from '../worker/sns/discovery-decode.js';
import {
  domainKey,
  REVERSE_LOOKUP_CLASS,
  reverseKeyFromDomainKey,
  toBase58,
} from '../src/core/sns/pda.js';
import { getDomainKeySync, getReverseKeyFromDomainKey } from '@bonfida/spl-name-service';

const parentKey = domainKey('parent');

/**
 * The slice a subscription sends for a reverse record of `text`: a parent byte, the owner (zero),
 * the class, the length, the text (cut).
 */
function reverseSlice(text: string): Buffer {
  const bytes = Buffer.from(`\0${text}`);
  const slice = Buffer.alloc(Math.min(SCAN_SLICE.length, SLICE_AT.data + 4 + bytes.length));
  REVERSE_LOOKUP_CLASS.copy(slice, SLICE_AT.class);
  slice.writeUInt32LE(bytes.length, SLICE_AT.data);
  bytes.copy(slice, SLICE_AT.data + 4, 0, slice.length - SLICE_AT.data - 4);
  return slice;
}

describe('classifyChange', () => {
  it('derives the subdomain name account as the SDK does', () => {
    for (const label of ['a', 'hello', 'ünï', '🦀']) {
      expect(subdomainKey(label, parentKey)).toBe(
        getDomainKeySync(`${label}.parent.sol`).pubkey.toBase58(),
      );
    }
  });

  it('proves a reverse record whose key is derived from the subdomain of its text', () => {
    const subdomain = subdomainKey('fresh', parentKey);
    const reverse = getReverseKeyFromDomainKey(
      getDomainKeySync('fresh.parent.sol').pubkey,
      getDomainKeySync('parent.sol').pubkey,
    ).toBase58();
    expect(classifyChange(reverse, reverseSlice('fresh'), parentKey)).toEqual({
      kind: 'reverse',
      subdomain,
      label: 'fresh',
    });
  });

  it('does not prove a reverse record made by hand, a cut text, or an empty one', () => {
    const other = toBase58(reverseKeyFromDomainKey(subdomainKey('other', parentKey), parentKey));
    expect(classifyChange(other, reverseSlice('fresh'), parentKey)).toEqual({ kind: 'unproven' });
    const long = 'x'.repeat(INLINE_TEXT_BYTES + 5);
    const longKey = toBase58(reverseKeyFromDomainKey(subdomainKey(long, parentKey), parentKey));
    expect(classifyChange(longKey, reverseSlice(long), parentKey)).toEqual({ kind: 'unproven' });
    const emptyKey = toBase58(reverseKeyFromDomainKey(subdomainKey('', parentKey), parentKey));
    expect(classifyChange(emptyKey, reverseSlice(''), parentKey)).toEqual({ kind: 'empty' });
  });

  it('takes any other account under the parent for a subdomain name account', () => {
    const key = subdomainKey('fresh', parentKey);
    const slice = Buffer.alloc(SCAN_SLICE.length);
    const owner = Buffer.alloc(32, 9);
    owner.copy(slice, SLICE_AT.owner);
    expect(classifyChange(key, slice, parentKey)).toEqual({
      kind: 'subdomain',
      subdomain: key,
      owner: toBase58(owner),
    });
  });
});
