/**
 * How often a decode past the thread's heap budget aborts the whole process instead of failing
 * the thread: runs `--runs` children, each decoding one getProgramAccounts reply of `--accounts`
 * accounts in a DecodeThread of `--heap` MiB, with `--load` busy processes beside them.
 *
 *   npx tsx bench/decode-oom.ts --runs 30 --accounts 80000 --heap 8 --load 2
 *
 * A child prints `thread-error <message>` or `decoded` and exits 0; an abort exits 134.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { toBase58 } from '../src/core/sns/pda.js';
import { DecodeThread } from '../worker/sns/decode-thread.js';

const { values: args } = parseArgs({
  options: {
    child: { type: 'boolean', default: false },
    runs: { type: 'string', default: '30' },
    accounts: { type: 'string', default: '80000' },
    heap: { type: 'string', default: '8' },
    load: { type: 'string', default: '0' },
  },
});

async function child(): Promise<void> {
  const n = Number(args.accounts);
  const value = Array.from({ length: n }, () => ({
    pubkey: toBase58(randomBytes(32)),
    account: { data: [randomBytes(99).toString('base64'), 'base64'] },
  }));
  const body = Buffer.from(
    JSON.stringify({ jsonrpc: '2.0', id: 1, result: { context: { slot: 42 }, value } }),
  );
  const thread = new DecodeThread({ heapMb: Number(args.heap), taskMs: 60_000 });
  try {
    const own = new Uint8Array(body.length);
    own.set(body);
    await thread.run({
      kind: 'program-accounts',
      method: 'getProgramAccounts',
      id: 1,
      body: own.buffer,
      parentKey: new Uint8Array(32),
    });
    console.log('decoded');
  } catch (err) {
    console.log(`thread-error ${(err as Error).message}`);
  } finally {
    await thread.close();
  }
}

async function parent(): Promise<void> {
  const busy: ChildProcess[] = [];
  for (let i = 0; i < Number(args.load); i++) {
    busy.push(spawn(process.execPath, ['-e', 'for(;;){}'], { stdio: 'ignore' }));
  }
  const tally = new Map<string, number>();
  try {
    for (let i = 0; i < Number(args.runs); i++) {
      const proc = spawn(
        process.execPath,
        [
          '--import',
          'tsx',
          new URL(import.meta.url).pathname,
          '--child',
          '--accounts',
          String(args.accounts),
          '--heap',
          String(args.heap),
        ],
        { stdio: ['ignore', 'pipe', 'ignore'] },
      );
      let out = '';
      proc.stdout?.on('data', (c: Buffer) => (out += c.toString()));
      const code = await new Promise<number | null>((resolve) => proc.on('exit', resolve));
      const outcome = code === 0 ? out.trim() : `abort (${code ?? proc.signalCode})`;
      tally.set(outcome, (tally.get(outcome) ?? 0) + 1);
      process.stderr.write(`${i + 1}: ${outcome}\n`);
    }
  } finally {
    for (const b of busy) b.kill();
  }
  console.log(JSON.stringify(Object.fromEntries(tally), null, 1));
}

await (args.child ? child() : parent());
