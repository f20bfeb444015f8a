/**
 * Builds dist/ (`npm run build`: the compiled modules, and the Lua scripts copied beside them)
 * unless it is current, so that `npm start` after no change starts at once. Current means that
 * dist/.build-stamp, written after a build that succeeded and dated when that build began, is
 * newer than every input: the files and folders under src/ and worker/ (a folder's time changes
 * when a file in it is added, renamed or removed; `.lua` files included), the entry main.ts,
 * tsconfig*.json, package.json (the build command) and package-lock.json (dependencies,
 * @types/node included).
 *
 *   node scripts/build-if-stale.mjs          build if needed (`npm start` runs this)
 *   node scripts/build-if-stale.mjs --check  exit 0 when current, 1 when a build is needed
 *
 * Runs in the current directory (npm runs scripts in the package root).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';

const STAMP = join('dist', '.build-stamp');

/** The latest modification time (ms) of `path` and, for a folder, of everything under it. */
function newest(path) {
  const stat = statSync(path, { throwIfNoEntry: false });
  if (!stat) return 0;
  let latest = stat.mtimeMs;
  if (stat.isDirectory()) {
    for (const entry of readdirSync(path)) latest = Math.max(latest, newest(join(path, entry)));
  }
  return latest;
}

function needsBuild() {
  const built = statSync(STAMP, { throwIfNoEntry: false });
  if (!built) return true;
  const inputs = [
    'main.ts',
    'src',
    'worker',
    'package.json',
    'package-lock.json',
    ...readdirSync('.').filter((name) => /^tsconfig.*\.json$/.test(name)),
  ];
  return Math.max(...inputs.map(newest)) >= built.mtimeMs;
}

if (process.argv.includes('--check')) process.exit(needsBuild() ? 1 : 0);
if (needsBuild()) {
  const began = new Date();
  process.stderr.write('sns-gateway: building dist/ (npm run build)\n');
  // npm sets npm_execpath for the scripts it runs (`npm start`); run by hand, npm is on the PATH.
  const npm = process.env.npm_execpath;
  const { status, signal } = npm
    ? spawnSync(process.execPath, [npm, 'run', '--silent', 'build'], { stdio: 'inherit' })
    : spawnSync('npm', ['run', '--silent', 'build'], { stdio: 'inherit' });
  if (status !== 0) {
    process.stderr.write(`sns-gateway: the build failed (${signal ?? `exit ${status}`})\n`);
    process.exit(1);
  }
  mkdirSync('dist', { recursive: true });
  writeFileSync(STAMP, '');
  // Dated when the build began: a source saved during the build makes the next start build again.
  utimesSync(STAMP, began, began);
}
