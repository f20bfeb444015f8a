import { domainKey, reverseKeyFromDomainKey, toBase58 } from '../../src/core/sns/pda.js';
import { REVERSE_LOOKUP_CLASS } from '../../src/core/sns/pda.js';
import { INLINE_TEXT_BYTES, SCAN_SLICE, SLICE_AT } from './name-slices.js';
import { classifyProgramAccounts } from './scan-classify.js';

/**
 * The decode thread's warm-up (docs/design.md, "Discovery"): before it says it is ready, the
 * thread classifies a made-up scan reply, so the first real scan after a worker starts runs code
 * the JIT has already compiled rather than paying for its compilation on the way to an answer.
 */

/** The made-up parent: any name; nothing is read or written under it. */
const PARENT = 'sns-gateway-warm-up';
/** Every this many labels is longer than the inline text, so the cut-text path runs too. */
const LONG_EVERY = 64;

/**
 * A `getProgramAccounts` reply (`withContext`, base64 {@link SCAN_SLICE}s) holding `count`
 * subdomains of a made-up parent and their reverse records, as a provider sends it.
 *
 * @returns the reply's bytes and the parent's key (32 bytes).
 */
export function warmUpReply(count: number): { body: Uint8Array; parentKey: Uint8Array } {
  const parentKey = domainKey(PARENT);
  const owner = domainKey(`${PARENT}-owner`);
  const value: Array<{ account: object; pubkey: string }> = [];
  // Keys in Agave's order (sorted), so the warm-up runs the reader of that form
  // (./canonical-accounts.ts), as a real scan does.
  const account = (pubkey: Uint8Array, slice: Buffer) => ({
    account: {
      data: [slice.toString('base64'), 'base64'],
      executable: false,
      lamports: 1_000_000,
      owner: 'namesLPneVptA9Z5rqUDD9tMTWEJwofgaYwp8cawRkX',
      rentEpoch: 0,
      space: 200,
    },
    pubkey: toBase58(pubkey),
  });
  for (let i = 0; i < count; i++) {
    const label = i % LONG_EVERY === 0 ? `warm-up-${'x'.repeat(INLINE_TEXT_BYTES)}-${i}` : `w${i}`;
    const child = domainKey(`${label}.${PARENT}`);
    const name = Buffer.alloc(SCAN_SLICE.length);
    parentKey.copy(name, 0, 31);
    owner.copy(name, SLICE_AT.owner);
    value.push(account(child, name));
    // A subdomain's reverse text is its label after a NUL (name-slices.ts).
    const text = Buffer.from(`\0${label}`);
    const reverse = Buffer.alloc(Math.min(SLICE_AT.data + 4 + text.length, SCAN_SLICE.length));
    parentKey.copy(reverse, 0, 31);
    REVERSE_LOOKUP_CLASS.copy(reverse, SLICE_AT.class);
    reverse.writeUInt32LE(text.length, SLICE_AT.data);
    text.copy(reverse, SLICE_AT.data + 4);
    value.push(account(reverseKeyFromDomainKey(child, parentKey), reverse));
  }
  const reply = { jsonrpc: '2.0', id: 1, result: { context: { slot: 1 }, value } };
  return { body: Buffer.from(JSON.stringify(reply)), parentKey };
}

/**
 * Classifies a made-up reply of `count` subdomains `rounds` times, streamed in parts as a
 * refresh's scan is, its parts dropped.
 *
 * @throws Error if a round lists other than what the reply holds: the warm-up ran other code.
 */
export function warmUp(count: number, rounds: number): void {
  const { body, parentKey } = warmUpReply(count);
  for (let round = 0; round < rounds; round++) {
    let listed = 0;
    const summary = classifyProgramAccounts('getProgramAccounts', body, 1, parentKey, undefined, {
      size: 2_000,
      cutBatch: 100,
      emit: (part) => (listed += part.members.count),
    });
    const cut = summary.waiting.length;
    if (listed + cut !== count) {
      throw new Error(`decode warm-up listed ${listed} and ${cut} cut of ${count} subdomains`);
    }
  }
}
