/**
 * The data the HTML report embeds as JSON (`<script type="application/json" id="gpumem-data">`):
 * written by the server (report-chart-data.ts) and read by the page's script (client.ts). All
 * numbers, and names as plain strings (never HTML).
 * @module
 */

/** An epoch as a shaded band on a timeline, in seconds on the timeline's clock. */
export interface EpochBand {
  name: string;
  start: number;
  end: number;
}

/** Allocated bytes of one allocating phase, stacked under a run's allocated line. */
interface TagArea {
  name: string;
  color: string;
  bytes: number[];
}

/** One device of a run over several devices: its allocated and reserved bytes on the run's clock. */
export interface DeviceLines {
  name: string;
  color: string;
  fill: string;
  t: number[];
  allocated: number[];
  reserved: number[];
}

/**
 * A strategy with a host tier: its allocated and reserved bytes split into device and host at
 * each point of its timeline (device = total less host), drawn on a second chart.
 */
export interface TierChart {
  canvasId: string;
  hostColor: string;
  hostFill: string;
  deviceAllocated: number[];
  hostAllocated: number[];
  deviceReserved: number[];
  hostReserved: number[];
  /** This chart's own byte axis: top and tick step. */
  ownYMax: number;
  ownYStep: number;
}

/** One run's memory over time. */
export interface TimelineChart {
  canvasId: string;
  allocator: string;
  color: string;
  fill: string;
  /** Seconds on the timeline's clock. */
  t: number[];
  /** The x axis's title: what the clock is. */
  xTitle: string;
  allocated: number[];
  reserved: number[];
  xMax: number;
  /** Allocated bytes by allocating phase, stacked under the allocated line (empty without tags). */
  tags: TagArea[];
  /** This chart's own byte axis (the default view: a large run does not flatten a small one). */
  ownYMax: number;
  ownYStep: number;
  phases: EpochBand[];
  /**
   * A run over several devices: each device's allocated and reserved bytes, drawn as lines of its
   * own colour on the run's chart (the run's own t, allocated, reserved and tags are then empty).
   */
  devices?: DeviceLines[];
  /** The host-tier chart of a strategy with a host tier; null for other strategies. */
  tiers: TierChart | null;
}

/** Each run's epoch times side by side: grouped bars, or lines above many epochs. */
export interface EpochChart {
  canvasId: string;
  type: 'bar' | 'line';
  labels: string[];
  datasets: { allocator: string; color: string; epochMs: (number | null)[] }[];
}

/** Each run's (and baseline's) measured epochs as a box: min–max bar, interquartile box, median. */
export interface SpreadChart {
  canvasId: string;
  labels: string[];
  colors: string[];
  range: [number, number][];
  box: [number, number][];
  median: number[];
}

/** Training loss per step of each run and baseline (baselines dashed). */
export interface LossChart {
  canvasId: string;
  datasets: { name: string; color: string; dash: boolean; step: number[]; loss: number[] }[];
}

/** Everything the page's script draws. */
export interface ReportData {
  /** Null without runs that have a spread of two or more measured epochs. */
  spreadChart: SpreadChart | null;
  /** Null when no run or baseline recorded step losses. */
  lossChart: LossChart | null;
  /** The byte axis shared by every timeline: top and tick step, round numbers in a binary unit. */
  yMax: number;
  yStep: number;
  timelines: TimelineChart[];
  /** Null when no run completed an epoch. */
  epochChart: EpochChart | null;
}

/** The id of the `<script type="application/json">` element that holds the {@link ReportData}. */
export type ReportDataElementId = 'gpumem-data';
