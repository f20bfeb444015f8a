/**
 * Remembers `compute`'s results by input, within bounds: inputs longer than `maxInputLength` are
 * computed every time (they could pin much memory), and a memo that holds `maxEntries` is
 * cleared whole before the next one is kept (a bound, not a cache policy: what is asked for again
 * comes back at once). An input whose computation throws is not kept.
 *
 * For small pure functions on hot paths (a parsed label, a derived key), where an LRU's
 * bookkeeping would cost about as much as the work it saves. Results are shared between callers:
 * they must not be changed.
 */
export function boundedMemo<T>(
  compute: (input: string) => T,
  { maxEntries, maxInputLength }: { maxEntries: number; maxInputLength: number },
): (input: string) => T {
  const kept = new Map<string, T>();
  return (input) => {
    let value = kept.get(input);
    if (value === undefined) {
      value = compute(input);
      if (input.length > maxInputLength) return value;
      if (kept.size >= maxEntries) kept.clear();
      kept.set(input, value);
    }
    return value;
  };
}
