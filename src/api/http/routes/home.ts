import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance } from 'fastify';

/** The repository root: the nearest folder above this file holding `public/index.html`. */
function findPage(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 6; i++) {
    const candidate = join(dir, 'public', 'index.html');
    if (existsSync(candidate)) return candidate;
    dir = dirname(dir);
  }
  throw new Error('public/index.html not found above ' + fileURLToPath(import.meta.url));
}

/**
 * `GET /`: a small page for people trying the gateway (enter a parent and an optional prefix, see
 * its subdomains with their owners from `/details` a page at a time, the cache state and the record
 * keys of a chosen record type; the table follows `/subdomains/:parent/events` while the page is
 * open). Plain HTML, fetch and EventSource: no build step.
 */
export async function homeRoutes(app: FastifyInstance) {
  const page = readFileSync(findPage());
  app.get('/', { schema: { hide: true } }, async (_req, reply) =>
    reply
      .type('text/html; charset=utf-8')
      .header('cache-control', 'public, max-age=300')
      .send(page),
  );
}
