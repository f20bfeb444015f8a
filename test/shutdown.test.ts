import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { closeSteps } from '../src/runtime/shutdown.js';

const silent = pino({ level: 'silent' });

describe('closeSteps', () => {
  it('runs every step in order even when one before it fails, and says so', async () => {
    const ran: string[] = [];
    const ok = await closeSteps(
      [
        {
          name: 'api',
          close: () => Promise.reject(new Error('api close failed')).finally(() => ran.push('api')),
        },
        {
          name: 'throws',
          close: () => {
            ran.push('throws');
            throw new Error('sync');
          },
        },
        { name: 'worker', close: async () => void ran.push('worker') },
      ],
      silent,
    );
    expect(ran).toEqual(['api', 'throws', 'worker']);
    expect(ok).toBe(false);
    expect(await closeSteps([{ name: 'api', close: async () => undefined }], silent)).toBe(true);
  });
});
