import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';

/** The nearest folder above this file holding `public/index.html`. */
function findPage(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const candidate = join(dir, 'public', 'index.html');
    if (existsSync(candidate)) return candidate;
    dir = dirname(dir);
  }
  throw new Error('public/index.html not found above ' + fileURLToPath(import.meta.url));
}

/** `GET /`: a small page for trying the gateway (plain HTML, fetch, EventSource: no build step). */
export async function homeRoutes(app: FastifyInstance) {
  const page = readFileSync(findPage());
  app.get('/', { schema: { hide: true } }, async (_req, reply) =>
    reply
      .type('text/html; charset=utf-8')
      .header('cache-control', 'public, max-age=300')
      .send(page),
  );
}
