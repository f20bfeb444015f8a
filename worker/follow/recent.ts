/**
 * The last `max` signatures added, the oldest let go first (one added again keeps its place): a
 * bounded memory of what the stream or a read already reported.
 */
export class RecentSignatures {
  private readonly signatures = new Set<string>();

  constructor(private readonly max: number) {}

  has(signature: string): boolean {
    return this.signatures.has(signature);
  }

  add(signature: string): void {
    this.signatures.add(signature);
    if (this.signatures.size <= this.max) return;
    const oldest = this.signatures.values().next();
    if (!oldest.done) this.signatures.delete(oldest.value);
  }
}
