import type { PackedMembers } from '../../src/core/cache/packed-members.js';
import type { ScannedMember } from '../../src/core/cache/scan-write.js';

/**
 * The members of a {@link PackedMembers}, read as the write's script reads them (read_members,
 * src/core/lua/includes/split-entry.lua): by bytes, each label framed by its length.
 *
 * @throws Error for a text that does not frame its count of members, or a label whose bytes are
 *   not its JSON's.
 */
export function unpackMembers({ text, count }: PackedMembers): ScannedMember[] {
  const bytes = Buffer.from(text);
  const out: ScannedMember[] = [];
  let pos = 0;
  while (pos < bytes.length) {
    const a = bytes.indexOf(0x20, pos);
    const b = bytes.indexOf(0x20, a + 1);
    const l = bytes.indexOf(0x20, b + 1);
    const c = bytes.indexOf(0x0a, l + 1);
    const after = c + 1 + Number(bytes.toString('latin1', b + 1, l));
    const [label, owner] = JSON.parse(`${bytes.toString('utf8', l + 1, c)}]`) as [string, string];
    if (!bytes.subarray(c + 1, after).equals(Buffer.from(label))) {
      throw new Error(`a packed label's bytes are not its JSON's: ${JSON.stringify(label)}`);
    }
    out.push([label, bytes.toString('latin1', pos, a), owner, bytes.toString('latin1', a + 1, b)]);
    pos = after;
  }
  if (out.length !== count) throw new Error(`${out.length} packed members, ${count} counted`);
  return out;
}
