/**
 * Assembles the WebAssembly modules of src/ from their text (`.wat` -> `.wasm` beside it) with
 * the `wabt` package, a development dependency: the `.wasm` files are committed, so neither a
 * build nor a start needs it.
 *
 *   node scripts/build-wasm.mjs          write every .wasm from its .wat (`npm run build:wasm`)
 *   node scripts/build-wasm.mjs --check  exit 1, naming them, when a .wasm is not its .wat's
 *
 * Runs in the current directory (npm runs scripts in the package root).
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { Buffer } from 'node:buffer';
import { join } from 'node:path';
import process from 'node:process';
import wabtInit from 'wabt';

/** Every `.wat` under `dir`. */
function watFiles(dir) {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.wat'))
    .map((e) => join(e.parentPath, e.name));
}

const wabt = await wabtInit();
const check = process.argv.includes('--check');
const stale = [];
for (const wat of watFiles('src')) {
  const module = wabt.parseWat(wat, readFileSync(wat, 'utf8'));
  module.validate();
  const bytes = Buffer.from(module.toBinary({}).buffer);
  module.destroy();
  const target = wat.replace(/\.wat$/, '.wasm');
  if (check) {
    let current;
    try {
      current = readFileSync(target);
    } catch {
      current = Buffer.alloc(0);
    }
    if (!current.equals(bytes)) stale.push(target);
  } else {
    writeFileSync(target, bytes);
  }
}
if (stale.length > 0) {
  process.stderr.write(`not assembled from their .wat (npm run build:wasm): ${stale.join(', ')}\n`);
  process.exitCode = 1;
}
