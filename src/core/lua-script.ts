import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RedisClient } from './redis.js';

/**
 * A line that includes a shared part: `--- @include "name"`, the name a path without `.lua`,
 * relative to the including file's folder (the form BullMQ's scripts use).
 */
const INCLUDE = /^--- @include "([^"\n]+)"[ \t]*$/;

/**
 * A script's include that cannot be resolved: a file that is not there, a line that is not of the
 * `--- @include "name"` form, or a part that includes itself through others.
 */
export class LuaIncludeError extends Error {
  override readonly name = 'LuaIncludeError';
  constructor(
    /** The file holding the include. */
    readonly file: string,
    /** The name it includes, as written (the whole line when it is not of the form). */
    readonly include: string,
    reason: string,
  ) {
    super(`${file}: --- @include "${include}": ${reason}`);
  }
}

/**
 * The text of the Lua script at `file` with its includes in place, each shared part once (where it
 * is first included: a part including another puts that one first). Read from disk on every call:
 * {@link LuaScript} keeps the result.
 *
 * @throws LuaIncludeError for an include that cannot be resolved (naming it and its file).
 * @throws the file system's error when `file` itself cannot be read.
 */
export function loadLua(file: string | URL): string {
  const root = typeof file === 'string' ? file : fileURLToPath(file);
  const included = new Set<string>([root]);
  const expand = (path: string, chain: readonly string[]): string => {
    const lines = readFileSync(path, 'utf8').split('\n');
    return lines
      .map((line) => {
        if (!line.startsWith('--- @include')) return line;
        const name = INCLUDE.exec(line)?.[1];
        if (name === undefined) throw new LuaIncludeError(path, line, 'not of the form');
        const target = join(dirname(path), `${name}.lua`);
        if (chain.includes(target)) throw new LuaIncludeError(path, name, 'includes itself');
        if (!existsSync(target)) throw new LuaIncludeError(path, name, `no file ${target}`);
        if (included.has(target)) return '';
        included.add(target);
        return expand(target, [...chain, target]).replace(/\n$/, '');
      })
      .join('\n');
  };
  return expand(root, [root]);
}

/**
 * One Lua script of the gateway, from a `.lua` file beside the code that runs it, and how its
 * reply is read. The text is loaded (includes resolved) on the first call, not at import; runs
 * are `EVALSHA` (the text is sent once per Redis node, by `EVAL` after a `NOSCRIPT`).
 */
export class LuaScript<Reply> {
  private loaded: { readonly text: string; readonly sha: string } | undefined;

  /**
   * @param file the script's file, a URL relative to the running module's `import.meta.url` (in a
   *   `lua/` folder): the build copies `.lua` files beside the compiled modules.
   * @param reply reads Redis's reply into the script's result; throws a TypeError for another
   *   shape (see {@link replyNumber} and its kin).
   */
  constructor(
    readonly file: URL,
    private readonly reply: (raw: unknown) => Reply,
  ) {}

  /**
   * The script's text, includes resolved.
   * @throws LuaIncludeError (see {@link loadLua}).
   */
  get text(): string {
    return this.load().text;
  }

  /** The SHA1 of {@link text}, as `EVALSHA` names it. */
  get sha(): string {
    return this.load().sha;
  }

  /**
   * Runs the script with `keys` (its KEYS, counted from them) and `args` (its ARGV) as one argument
   * vector, so a script may take more arguments than a call's spread can. A Buffer argument
   * reaches the script as its bytes.
   *
   * @throws the Redis error (a `ReplyError` for `redis.error_reply`), or the TypeError of `reply`.
   */
  async run(
    redis: RedisClient,
    keys: readonly string[],
    args: readonly (string | number | Buffer)[] = [],
  ): Promise<Reply> {
    // Buffers go as their bytes (binary-safe in Lua strings); numbers as decimal text.
    const argv: Array<string | Buffer> = [...keys];
    for (const arg of args) argv.push(typeof arg === 'number' ? String(arg) : arg);
    const { text, sha } = this.load();
    let raw: unknown;
    try {
      raw = await redis.evalsha(sha, keys.length, argv);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      raw = await redis.eval(text, keys.length, argv);
    }
    return this.reply(raw);
  }

  private load(): { readonly text: string; readonly sha: string } {
    if (!this.loaded) {
      const text = loadLua(this.file);
      this.loaded = { text, sha: createHash('sha1').update(text).digest('hex') };
    }
    return this.loaded;
  }
}

/** The reply as a list. @throws TypeError for another shape. */
export function replyList(raw: unknown): unknown[] {
  if (!Array.isArray(raw)) throw new TypeError(`a script replied ${typeof raw}, not a list`);
  const list: unknown[] = raw;
  return list;
}

/** The reply as an integer (Lua numbers reach the client as integers). @throws TypeError. */
export function replyNumber(raw: unknown): number {
  if (typeof raw !== 'number') throw new TypeError(`a script replied ${typeof raw}, not a number`);
  return raw;
}

/** The reply as a string. @throws TypeError for another shape. */
export function replyString(raw: unknown): string {
  if (typeof raw !== 'string') throw new TypeError(`a script replied ${typeof raw}, not a string`);
  return raw;
}

/** The reply as a list of strings. @throws TypeError for another shape. */
export function replyStrings(raw: unknown): string[] {
  return replyList(raw).map(replyString);
}

/** The reply as a list of strings, or null for a nil reply. @throws TypeError otherwise. */
export function replyStringsOrNull(raw: unknown): string[] | null {
  return raw === null ? null : replyStrings(raw);
}
