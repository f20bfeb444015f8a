import { readFileSync } from 'node:fs';

/**
 * ./pda.wat assembled (./pda.wasm, `npm run build:wasm`): compiled and instantiated once, at load,
 * from the file beside this module. It holds the arithmetic of ./ed25519.ts's curve check and
 * ./pda.ts's program-address search (SHA-256 included); both modules write their inputs into its
 * memory and read its answers back, synchronously, so no call sees another's state.
 */

/** Node's global `WebAssembly`, the part used here: the project's libs (ES2023, Node) declare none. */
declare const WebAssembly: {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: object };
};

/** An exported `i32` global: an address in {@link pdaWasm}'s memory. */
type Address = { value: number };

/** The module's exports (./pda.wat says what each takes and returns). */
export const pdaWasm = new WebAssembly.Instance(
  new WebAssembly.Module(readFileSync(new URL('./pda.wasm', import.meta.url))),
).exports as {
  memory: { buffer: ArrayBuffer };
  /** Where d's eight 32-bit limbs go, one an i64. */
  D: Address;
  /** A name search's 150-byte message (hashed name, class, parent, bump, program id, marker). */
  SEEDS: Address;
  /** The search's state after its message's first block. */
  MID: Address;
  /** The message of `hash_name`, to the end of memory. */
  MSG: Address;
  on_curve: () => number;
  is_square: (...words: [number, number, number, number, number, number, number, number]) => number;
  hash_name: (length: number) => void;
  init_search: () => void;
  midstate: () => void;
  /** One candidate of a search (its bump), at address 0, with no curve check. */
  candidate: (bump: number) => void;
  search: () => number;
  search_from_mid: () => number;
};

/** The module's memory as bytes; it never grows, so the view stays valid. */
export const pdaMemory = Buffer.from(pdaWasm.memory.buffer);
/** The same memory as 32-bit words (the platform's byte order). */
export const pdaWords = new Uint32Array(pdaWasm.memory.buffer);
