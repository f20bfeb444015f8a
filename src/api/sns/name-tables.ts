import { createHash } from 'node:crypto';

/**
 * The Unicode version whose case and white-space tables `normalizeName` (./names.ts) follows
 * (docs/operations.md, "Node and the Unicode tables"). Derivations are cached as immutable, so
 * every replica must lower-case with these tables, whatever its Node release line.
 */
export const NAME_UNICODE = '17.0';

/**
 * SHA-256 of {@link nameTablesFingerprint} on a runtime with the {@link NAME_UNICODE} tables (Node
 * 20.20.2, 22.22.1 and later, 24.13.1 and later, 26.x all give it; 22.22.0, 24.13.0 and earlier,
 * with Unicode 16.0, do not).
 */
export const NAME_TABLES_SHA256 =
  'a684fe2125321d8f26901ada816f7448c76220beba0092c5b912294c1691b9b2' as const;

/**
 * Strings whose lower-casing depends on their context (Final_Sigma, the one context rule of the
 * root locale that `toLowerCase` applies), so a runtime that drops the rule is caught as well.
 */
const CONTEXT_SAMPLES = ['ΑΣ', 'ΑΣ.ΣΑ', 'Σ', 'ΑΣΑ', 'ΑΣ\u0301', 'İ'];

/**
 * What name normalization does on this runtime, as one digest: every code point (surrogates
 * excepted) that `lower` changes, with its image; every code point of the first plane that `trim`
 * removes; and {@link CONTEXT_SAMPLES}. Two runtimes with the same digest normalize every name alike.
 *
 * @param lower the lower-casing under test (`toLowerCase`, what normalizeName uses).
 * @param trim the trimming under test (`trim`).
 * @returns a hex SHA-256. Tens of milliseconds of CPU: computed once per process by
 *   {@link checkNameTables}.
 */
export function nameTablesFingerprint(
  lower: (s: string) => string = (s) => s.toLowerCase(),
  trim: (s: string) => string = (s) => s.trim(),
): string {
  const hash = createHash('sha256');
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const s = String.fromCodePoint(cp);
    const lowered = lower(s);
    if (lowered !== s) hash.update(`L${cp.toString(16)}:${lowered}\n`);
    // White space is the Zs category and a few controls, all in the first plane.
    if (cp <= 0xffff && trim(s) === '') hash.update(`W${cp.toString(16)}\n`);
  }
  for (const sample of CONTEXT_SAMPLES) hash.update(`C${sample}:${lower(sample)}\n`);
  return hash.digest('hex');
}

/** Thrown at start when the runtime normalizes names with other tables than the documented ones. */
export class NameTablesError extends Error {
  override readonly name = 'NameTablesError';
}

let checked: string | undefined;

/**
 * Refuses a runtime whose lower-casing or trimming differs from the {@link NAME_UNICODE} tables:
 * the same name would derive another key there, and derivations are cached as immutable. The
 * check is on behaviour, not on the release line (docs/operations.md, "Node and the Unicode tables"). Computed once
 * per process; later calls are free.
 *
 * @param fingerprint the digest of the runtime under test (tests pass another one).
 * @throws NameTablesError naming the runtime's Unicode version and the fix.
 */
export function checkNameTables(fingerprint: () => string = nameTablesFingerprint): void {
  const digest =
    fingerprint === nameTablesFingerprint ? (checked ??= fingerprint()) : fingerprint();
  if (digest === NAME_TABLES_SHA256) return;
  throw new NameTablesError(
    `Node ${process.version} lower-cases names with the tables of Unicode ` +
      `${process.versions.unicode ?? 'unknown'}, not those of Unicode ${NAME_UNICODE} that ` +
      `derivations are made and cached with. Run a Node whose process.versions.unicode is ` +
      `${NAME_UNICODE} (22.22.1 or later 22.x, 24.13.1 or later 24.x, or 26.x; see docs/operations.md, ` +
      `"Node and the Unicode tables")`,
  );
}
