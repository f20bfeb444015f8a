import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/**
 * The path of the executable `name` on the PATH, or in /usr/sbin or /sbin (not on every user's
 * PATH; Debian puts nginx and some servers there), or undefined. Suites that drive a
 * distribution program run it by this path, and skip, saying why, where it is missing.
 */
export function findBinary(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/sbin'];
  for (const dir of dirs) {
    if (!dir) continue;
    const path = join(dir, name);
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** Whether {@link findBinary} finds `name`. */
export const hasBinary = (name: string): boolean => findBinary(name) !== undefined;

/**
 * {@link findBinary}'s path of `name`, for a suite that has already checked it is there.
 *
 * @throws Error when it is not.
 */
export function binary(name: string): string {
  const path = findBinary(name);
  if (!path) throw new Error(`${name} is not installed`);
  return path;
}
