import { Redis } from 'ioredis';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { BUCKET_CHARS, ID_CHARS } from '../src/core/cache/registry-index.js';
import { loadLua, LuaIncludeError, LuaScript, replyNumber } from '../src/core/lua-script.js';
import { deletePrefix, uniquePrefix } from './support/gateway.js';

const ROOT = join(import.meta.dirname, '..');

/** Every file under `dir` (relative to the repository) whose name ends with `suffix`. */
function filesUnder(dir: string, suffix: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith(suffix))
    .map((f) => join(dir, f));
}

const luaFiles = [...filesUnder('src', '.lua'), ...filesUnder('worker', '.lua')];
/** The scripts the code runs; the shared parts they include are in `includes/` folders. */
const scripts = luaFiles.filter((f) => !f.split('/').includes('includes'));
const sources = [...filesUnder('src', '.ts'), ...filesUnder('worker', '.ts')].map((f) => ({
  file: f,
  text: readFileSync(join(ROOT, f), 'utf8'),
}));

describe('Lua scripts', () => {
  const prefix = uniquePrefix();
  let redis: Redis;
  let dir: string;
  beforeAll(() => {
    redis = new Redis(inject('redisUrl'), { maxRetriesPerRequest: 1 });
    dir = mkdtempSync(join(tmpdir(), 'sns-gateway-lua-'));
  });
  afterAll(async () => {
    rmSync(dir, { recursive: true, force: true });
    await deletePrefix(redis, prefix);
    redis.disconnect();
  });

  it('are all in files, each run by the code, and every file the code names is there', () => {
    expect(scripts).not.toEqual([]);
    const named = new Set<string>();
    for (const { file, text } of sources) {
      expect(text, file).not.toMatch(/defineCommand|\blua: /);
      for (const m of text.matchAll(/new URL\(\s*'([^']+\.lua)',\s*import\.meta\.url\s*\)/g)) {
        const path = join(file, '..', m[1] ?? '');
        expect(existsSync(join(ROOT, path)), `${file} names ${m[1]}`).toBe(true);
        named.add(path);
      }
    }
    expect([...named].sort()).toEqual([...scripts].sort());
  });

  it.each(scripts)('%s loads, its includes resolved, and compiles in Redis', async (script) => {
    const text = loadLua(join(ROOT, script));
    expect(text).not.toMatch(/^--- @include/m);
    // SCRIPT LOAD compiles without running: a syntax error, or an include missing a definition
    // the script uses at load time, fails here.
    const sha = await redis.script('LOAD', text);
    expect(sha).toMatch(/^[0-9a-f]{40}$/);
  });

  it("holds the registry index's id lengths equal in Lua and TypeScript", () => {
    const lua = readFileSync(join(ROOT, 'src/core/lua/includes/registry-member.lua'), 'utf8');
    const constant = (name: string) =>
      Number(new RegExp(`^local ${name} = (\\d+)$`, 'm').exec(lua)?.[1]);
    expect(constant('ID_CHARS')).toBe(ID_CHARS);
    expect(constant('BUCKET_CHARS')).toBe(BUCKET_CHARS);
  });

  it('includes a shared part once, however many parts include it', () => {
    writeFileSync(join(dir, 'base.lua'), 'local base = 1\n');
    writeFileSync(join(dir, 'left.lua'), '--- @include "base"\nlocal left = base\n');
    writeFileSync(join(dir, 'right.lua'), '--- @include "base"\nlocal right = base\n');
    writeFileSync(
      join(dir, 'both.lua'),
      '--- @include "left"\n--- @include "right"\nreturn left + right\n',
    );
    expect(loadLua(join(dir, 'both.lua'))).toBe(
      'local base = 1\nlocal left = base\n\nlocal right = base\nreturn left + right\n',
    );
  });

  it('refuses a missing include, naming it and its file', () => {
    writeFileSync(join(dir, 'broken.lua'), 'local a = 1\n--- @include "includes/nowhere"\n');
    const load = () => loadLua(join(dir, 'broken.lua'));
    expect(load).toThrow(LuaIncludeError);
    expect(load).toThrow(/broken\.lua: --- @include "includes\/nowhere": no file .*nowhere\.lua/);
    writeFileSync(join(dir, 'deep.lua'), '--- @include "broken"\nreturn 1\n');
    expect(() => loadLua(join(dir, 'deep.lua'))).toThrow(/broken\.lua: .*"includes\/nowhere"/);
  });

  it('refuses an include not of the form, and a part that includes itself', () => {
    writeFileSync(join(dir, 'unquoted.lua'), '--- @include slots\nreturn 1\n');
    expect(() => loadLua(join(dir, 'unquoted.lua'))).toThrow(/not of the form/);
    writeFileSync(join(dir, 'ping.lua'), '--- @include "pong"\nlocal ping = 1\n');
    writeFileSync(join(dir, 'pong.lua'), '--- @include "ping"\nlocal pong = 1\n');
    expect(() => loadLua(join(dir, 'ping.lua'))).toThrow(
      /pong\.lua: --- @include "ping": includes itself/,
    );
  });

  it('runs a script Redis has never seen (NOSCRIPT, then EVAL) and again by its SHA', async () => {
    // A text no other run has sent: EVALSHA cannot know it.
    const key = `${prefix}:lua-probe`;
    writeFileSync(
      join(dir, 'fresh.lua'),
      `-- ${prefix}\nreturn redis.call('INCRBY', KEYS[1], ARGV[1])\n`,
    );
    const script = new LuaScript(pathToFileURL(join(dir, 'fresh.lua')), replyNumber);
    expect(await redis.script('EXISTS', script.sha)).toEqual([0]);
    expect(await script.run(redis, [key], [2])).toBe(2);
    expect(await redis.script('EXISTS', script.sha)).toEqual([1]);
    expect(await script.run(redis, [key], ['3'])).toBe(5);
    await expect(
      new LuaScript(pathToFileURL(join(dir, 'fresh.lua')), (raw) => {
        throw new TypeError(`not this: ${String(raw)}`);
      }).run(redis, [key], [1]),
    ).rejects.toThrow('not this: 6');
  });
});
