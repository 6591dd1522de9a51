/**
 * The doctor's honest boundaries: a need replayed on the host is not yet what a device must have.
 * The program also holds memory outside its allocator (the CUDA context's growth, cuBLAS handles
 * and workspaces, NCCL, the driver's reserve), known only as a range, and a strategy that stands
 * for another allocator (the model of PyTorch's) errs by a fraction of the need. A band around each
 * need holds both; a capacity inside the band of the need that decides is too close to call.
 * @module
 */

const MiB = 1024 * 1024;

/** Device memory the program holds outside its allocator, as a range, and where the figures come from. */
export interface OutsideMemory {
  lowBytes: number;
  highBytes: number;
  /** In words, for the notes. */
  source: string;
}

/**
 * The default memory outside the allocator that appears after the capacity was taken, measured on
 * H200s with PyTorch 2.11: 0–250 MiB. gpumem's strategies under a `cudaMalloc` ballast (taken after
 * the CUDA context and a first cuBLAS product) ran out of memory 0 MiB (greedy generation: no
 * backward pass), under 100 MiB (GPT-2 and BERT fine-tuning of bench/traces) and 150 to 250 MiB (two
 * other fine-tuning programs) above the need their replay found (bench/RESULTS.md, "Is this OOM
 * real?"). Measure your own program and pass it (`--outside`).
 */
export const defaultOutsideMemory: OutsideMemory = {
  lowBytes: 0,
  highBytes: 250 * MiB,
  source:
    "the default, measured on H200s, PyTorch 2.11: 0–250 MiB (gpumem's strategies under a cudaMalloc ballast ran out that far above their replayed need, by program)",
};

/**
 * The relative error of the model of PyTorch's caching allocator (its twin, `caching`): ±0.4%,
 * with {@link defaultPytorchModelErrorFloorBytes} at the least. Measured on H200s, PyTorch 2.11,
 * under `set_per_process_memory_fraction` on four programs: PyTorch's real need fell within 0.2% of
 * the twin's on GPT-2 and BERT fine-tuning, 0.2–0.5% under it on a Llama fine-tuning under
 * expandable segments, and 0.6–1.1% (3 to 6 MiB) over it on GPT-2 generation recorded on another GPU.
 */
export const defaultPytorchModelError = 0.004;

/**
 * The least error of the PyTorch model, in bytes: 4 MiB. Allocations whose size depends on the GPU
 * (cuBLAS workspaces, which PyTorch's allocator serves) differ between the GPU that recorded a
 * snapshot and the one it runs on; on a small program those few MiB are more than its relative error.
 */
export const defaultPytorchModelErrorFloorBytes = 4 * MiB;

/**
 * The relative error of gpumem's own strategies: 0. Their replay runs their own code (on its host
 * twin, the same logic), so the need it finds is theirs; what it does not see is the memory outside
 * the allocator, counted apart.
 */
export const defaultStrategyModelError = 0;

/** A need, and the device memory the program needs under it: at least `lowBytes`, at most `highBytes`. */
export interface NeedBand {
  /** The allocator's need, as replayed: the bytes it takes from the device. */
  needBytes: number;
  /** The least the device must have: the need less the model's error and the search's gap, plus the least outside memory. */
  lowBytes: number;
  /** The most it may need: the need plus the model's error, plus the most outside memory. */
  highBytes: number;
  /** The memory outside the allocator counted at each end. */
  outsideLowBytes: number;
  outsideHighBytes: number;
  /** The model's error at this need, each way (the need times its relative error). */
  modelErrorBytes: number;
  /** How far under `needBytes` the true minimum may lie: the last gap of the bisection (0 when exact). */
  searchGapBytes: number;
}

/** Where a capacity falls against a band. */
export type BandCall = 'fits' | 'too-close' | 'does-not-fit';

/** Checks `outside`: non-negative safe integers, low at most high. */
export function checkOutsideMemory(outside: OutsideMemory): void {
  for (const [name, value] of [
    ['outside.lowBytes', outside.lowBytes],
    ['outside.highBytes', outside.highBytes],
  ] as const) {
    if (!Number.isSafeInteger(value) || value < 0)
      throw new RangeError(`Expected a non-negative integer for ${name} but received ${String(value)}`);
  }
  if (outside.lowBytes > outside.highBytes)
    throw new RangeError(`Expected outside.lowBytes <= outside.highBytes but received ${outside.lowBytes} and ${outside.highBytes}`);
}

/** Checks a relative error: a finite number in [0, 1). */
export function checkRelativeError(value: number, name: string): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0 || value >= 1)
    throw new RangeError(`Expected a number from 0 to less than 1 for ${name} but received ${String(value)}`);
}

/**
 * The band of `needBytes`, replayed within `searchGapBytes`, by a model that errs by `relativeError`
 * of the need, and by `errorFloorBytes` at the least.
 */
export function needBand(
  needBytes: number,
  searchGapBytes: number,
  relativeError: number,
  outside: OutsideMemory,
  errorFloorBytes = 0,
): NeedBand {
  const modelErrorBytes = Math.max(Math.ceil(needBytes * relativeError), errorFloorBytes);
  return {
    needBytes,
    lowBytes: Math.max(0, needBytes - searchGapBytes - modelErrorBytes) + outside.lowBytes,
    highBytes: needBytes + modelErrorBytes + outside.highBytes,
    outsideLowBytes: outside.lowBytes,
    outsideHighBytes: outside.highBytes,
    modelErrorBytes,
    searchGapBytes,
  };
}

/** Fits when the capacity covers the band's top, does not when it is under its bottom; too close in between. */
export function bandCall(band: NeedBand, capacityBytes: number): BandCall {
  if (capacityBytes >= band.highBytes) return 'fits';
  return capacityBytes < band.lowBytes ? 'does-not-fit' : 'too-close';
}

/** The capacity less the band's middle: how far the central estimate of the device's need is under it (negative: over). */
export function bandMargin(band: NeedBand, capacityBytes: number): number {
  return capacityBytes - Math.round((band.lowBytes + band.highBytes) / 2);
}
