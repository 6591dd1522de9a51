/**
 * The workload a command trains when none is named, and why a named one cannot train here, asked
 * of the workload registry alone: each workload says what it trains on and, where that must be
 * installed (the mlp's MNIST), whether it is here and how to get it (Workload.data). No model is
 * named here.
 * @module
 */
import { getWorkload, listWorkloads, type AnyWorkload } from '@gpumem/gnn';

/** The workload to train when none is named, and a note to say once when it is not the first registered. */
export interface DefaultWorkload {
  model: string;
  note?: string;
}

/** Whether a workload's data is here: always for one that makes its own. */
function dataHere(w: AnyWorkload): boolean {
  return w.data === undefined || w.data.available();
}

/**
 * The first registered workload (the mlp on MNIST) where its data is here; else the first whose
 * data is here (the gcn on a generated graph, no download), with a note saying so and how to get
 * the first's data. Where no workload's data is here, the first: training it names what is missing.
 */
export function defaultWorkload(): DefaultWorkload {
  const all = listWorkloads();
  const first = all[0];
  if (first === undefined) throw new RangeError('Expected a registered workload to train but none is registered');
  if (dataHere(first)) return { model: first.name };
  const chosen = all.find(dataHere);
  if (chosen === undefined) return { model: first.name };
  return {
    model: chosen.name,
    note:
      `${first.trainsOn} is not installed, so this trains the ${chosen.name} on ${chosen.trainsOn}${chosen.data === undefined ? ' (no download)' : ''}; ` +
      `for the ${first.name} on ${first.trainsOn}: ${first.data!.installHint}`,
  };
}

/**
 * Why workload `model` cannot train here for want of its data ('trains on MNIST, which is not
 * installed: <how to get it>'), or undefined when it can; the caller names the workload first.
 */
export function missingDataProblem(model: string): string | undefined {
  const w = getWorkload(model);
  if (dataHere(w)) return undefined;
  return `trains on ${w.trainsOn}, which is not installed: ${w.data!.installHint}`;
}

/**
 * What the command line's help says of the default: 'mlp where MNIST is installed, else gcn, which
 * needs no download'.
 */
export function defaultWorkloadHelp(): string {
  const all = listWorkloads();
  const first = all[0];
  if (first === undefined) return 'none registered';
  if (first.data === undefined) return first.name;
  const fallback = all.find((w) => w.data === undefined);
  return `${first.name} where ${first.trainsOn} is installed${fallback ? `, else ${fallback.name}, which needs no download` : ''}`;
}
