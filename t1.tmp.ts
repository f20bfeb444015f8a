import { PublicKey } from '@solana/web3.js';
import { randomBytes } from 'node:crypto';
import { isOnCurve } from './src/sns/ed25519.ts';
const N = 50000;
const pts = Array.from({ length: N }, () => randomBytes(32));
let bad = 0;
for (const p of pts) if (isOnCurve(p) !== PublicKey.isOnCurve(p)) bad++;
console.log('mismatch', bad);
for (let r = 0; r < 3; r++) {
  const t = performance.now(); let c = 0;
  for (const p of pts) if (isOnCurve(p)) c++;
  console.log('us', ((performance.now() - t) * 1000) / N, c / N);
}
