import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/**
 * True when an executable `name` is on the PATH (or in /usr/sbin, which is not on every user's
 * PATH): suites that drive a distribution program skip, saying why, where it is missing.
 */
export function hasBinary(name: string): boolean {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/sbin'];
  return dirs.some((dir) => {
    try {
      accessSync(join(dir, name), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}
