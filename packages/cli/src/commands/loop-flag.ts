/**
 * `--loop`, taken alike by the commands that replay a trace (`gpumem replay`, `gpumem doctor`): the
 * loop the replay runs in, or 'auto' to leave the choice to the replay (native for native
 * strategies, TypeScript for plug-ins).
 * @module
 */
import type { ReplayLoop } from '@gpumem/trace';
import type { FlagSpec, FlagValues } from './args.js';

export const loopFlag: FlagSpec = {
  type: 'string',
  choices: ['auto', 'native', 'typescript'],
  default: 'auto',
  help: 'auto: native loop for native strategies, TypeScript for plug-ins',
};

/** The replay's `loop` option from the parsed flags: none for 'auto'. */
export function loopOption(flags: FlagValues): { loop?: ReplayLoop } {
  return flags.loop !== 'auto' ? { loop: flags.loop as ReplayLoop } : {};
}
