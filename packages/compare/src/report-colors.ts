/**
 * The HTML report's colours: one per run (the table's swatches and the charts' lines agree), the
 * phase tags' areas and the host tier.
 * @module
 */

/** One colour per run, in run order (repeats after ten). */
const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22'];

/** Colours of the phase tags' stacked areas (muted, so the run's own lines stay on top). */
const TAG_COLORS = ['#b0b7bf', '#8fb3d9', '#f2b36f', '#e88c8c', '#9fd49a', '#c7a6e0', '#d9cf7a', '#88d1c9'];

/** The host tier's colour on a run's tier chart (the device tier has the run's colour). */
export const HOST_COLOR = '#00897b';

/** The colour of the `index`-th phase tag's area. */
export function tagColor(index: number): string {
  return TAG_COLORS[index % TAG_COLORS.length]!;
}

/** The colour of the `index`-th run (or baseline, or device, counted on from the runs). */
export function colorOf(index: number): string {
  return PALETTE[index % PALETTE.length]!;
}

/** `#rrggbb` with an alpha, as `rgba(...)`. */
export function withAlpha(hex: string, alpha: number): string {
  const n = Number.parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
}
