// A small seeded PRNG (mulberry32) for the simulation: the same seed gives the same operation
// sequence on every store and in every process, with no dependency and no global state.

export class Rng {
  #state: number;

  constructor(seed: number) {
    // Spread small consecutive seeds apart so that seed 1 and seed 2 do not start alike.
    this.#state = (Math.imul(seed >>> 0, 0x9e3779b1) ^ 0x5bd1e995) >>> 0;
  }

  /** A uint32. */
  next(): number {
    let t = (this.#state = (this.#state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** An integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + (this.next() % (hi - lo + 1));
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.next() / 4294967296 < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.next() % items.length]!;
  }

  /** One of `weights`' keys, each as likely as its weight. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K {
    const entries = Object.entries(weights) as [K, number][];
    const total = entries.reduce((s, [, w]) => s + w, 0);
    let r = this.next() % total;
    for (const [key, w] of entries) {
      if (r < w) return key;
      r -= w;
    }
    return entries[entries.length - 1]![0];
  }
}
