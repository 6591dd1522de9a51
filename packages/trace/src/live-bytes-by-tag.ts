/**
 * Live bytes split by the tag of the allocation that holds them, followed event by event: what the
 * stacked "by tag" view of a memory timeline is drawn from, for a replay's profile and for a run's
 * tracking events alike.
 * @module
 */

/**
 * The live bytes of each tag (tags are indices, 0 to `tags` - 1) over a series of steps. An
 * allocation adds its bytes to its tag; a free takes them from the tag its allocation had (tag 0
 * for a pointer allocated before the first step); {@link record} writes the split after a step.
 */
export class LiveBytesByTag {
  /** One series per tag: at index i, the tag's live bytes after step i (as {@link record} wrote it). */
  readonly series: number[][];
  readonly #now: Float64Array;
  /** Each live pointer's tag. */
  readonly #tagOfPtr = new Map<number, number>();

  /** `before`: the bytes live before the first step, counted in tag 0. */
  constructor(tags: number, steps: number, before = 0) {
    this.series = Array.from({ length: tags }, () => new Array<number>(steps));
    this.#now = new Float64Array(tags);
    if (tags > 0) this.#now[0] = before;
  }

  alloc(ptr: number, bytes: number, tag: number): void {
    this.#tagOfPtr.set(ptr, tag);
    this.#now[tag]! += bytes;
  }

  free(ptr: number, bytes: number): void {
    const tag = this.#tagOfPtr.get(ptr) ?? 0;
    this.#tagOfPtr.delete(ptr);
    this.#now[tag]! -= bytes;
  }

  /** Writes each tag's live bytes at `step`. */
  record(step: number): void {
    for (let k = 0; k < this.series.length; k++) this.series[k]![step] = this.#now[k]!;
  }
}
