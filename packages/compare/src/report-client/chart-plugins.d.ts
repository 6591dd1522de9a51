// The report's own Chart.js plug-in option (client.ts registers the plug-in), so that charts pass it type-checked.
import type { ChartType } from 'chart.js';
import type { EpochBand } from './report-data.js';

declare module 'chart.js' {
  interface PluginOptionsByType<TType extends ChartType> {
    /** Shaded bands and a label for each epoch on a timeline chart. */
    epochBands?: { phases: EpochBand[] };
  }
}
