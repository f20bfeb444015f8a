#!/usr/bin/env node
// Fails when an installed package's `engines.node` does not accept the running Node, so a
// dependency that needs a newer Node is caught by `npm test` rather than in production.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import console from 'node:console';
import process from 'node:process';
import semver from 'semver';

const lock = JSON.parse(readFileSync('package-lock.json', 'utf8'));
const bad = [];
// The project's own range first: the supported LTS lines, from their first release with the
// Unicode tables names are lower-cased with (docs/operations.md, "Node and the Unicode tables").
const own = JSON.parse(readFileSync('package.json', 'utf8')).engines?.node;
if (own && !semver.satisfies(process.version, own)) bad.push(`sns-gateway itself: node ${own}`);
for (const [path, meta] of Object.entries(lock.packages ?? {})) {
  if (!path || !existsSync(join(path, 'package.json'))) continue; // optional, for another platform
  const range = JSON.parse(readFileSync(join(path, 'package.json'), 'utf8')).engines?.node;
  if (range && !semver.satisfies(process.version, range, { includePrerelease: true })) {
    bad.push(`${path.replace(/^node_modules\//, '')}@${meta.version}: node ${range}`);
  }
}
if (bad.length > 0) {
  console.error(`packages whose engines refuse Node ${process.version}:\n  ${bad.join('\n  ')}`);
  process.exit(1);
}
console.log(`engines: every installed package accepts Node ${process.version}`);
