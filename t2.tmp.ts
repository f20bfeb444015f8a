import { randomBytes } from 'node:crypto';
import { isOnCurve } from './src/sns/ed25519.ts';
const N = 50000;
const pts = Array.from({ length: N }, () => randomBytes(32));
for (let r = 0; r < 8; r++) {
  const t = process.cpuUsage(); let c = 0;
  for (const p of pts) if (isOnCurve(p)) c++;
  const u = process.cpuUsage(t);
  console.log('cpu us', ((u.user + u.system) / N).toFixed(2));
}
