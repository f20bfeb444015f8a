import { describe, expect, it } from 'vitest';
import { classifyChange, subdomainKey } from '../src/sns/change.js';
import { INLINE_TEXT_BYTES, SLICE_LEN } from '../src/sns/discovery-decode.js';
import {
  domainKey,
  REVERSE_LOOKUP_CLASS,
  reverseKeyFromDomainKey,
  toBase58,
} from '../src/sns/pda.js';
import { getDomainKeySync, getReverseKeyFromDomainKey } from '@bonfida/spl-name-service';

const parentKey = domainKey('parent');

/** The slice a subscription sends for a reverse record of `text`: class, length, text (cut). */
function reverseSlice(text: string): Buffer {
  const bytes = Buffer.from(`\0${text}`);
  const slice = Buffer.alloc(Math.min(SLICE_LEN, 36 + bytes.length));
  REVERSE_LOOKUP_CLASS.copy(slice, 0);
  slice.writeUInt32LE(bytes.length, 32);
  bytes.copy(slice, 36, 0, slice.length - 36);
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
    expect(classifyChange(key, Buffer.alloc(SLICE_LEN), parentKey)).toEqual({
      kind: 'subdomain',
      subdomain: key,
    });
  });
});
