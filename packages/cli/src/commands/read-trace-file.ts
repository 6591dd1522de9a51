/**
 * Reading the trace a command was given, for `gpumem replay` and `gpumem doctor`: a file that cannot
 * be read or parsed is a message on stderr naming the command, and no stack trace.
 */
import { readTrace, TraceBudgetError, TraceFormatError, type ReadTrace } from '@gpumem/trace';
import { stderrText } from '../terminal.js';

/** Reads the trace; prints why (as `gpumem COMMAND: ...`) and returns undefined when it cannot (exit 1). */
export async function readTraceOrExplain(command: string, file: string, device?: number): Promise<ReadTrace | undefined> {
  try {
    return await readTrace(file, device === undefined ? {} : { device });
  } catch (e) {
    if (e instanceof TraceFormatError) {
      const what = e instanceof TraceBudgetError ? "trace past the readers' budget" : 'malformed trace';
      stderrText.write(`gpumem ${command}: ${what}: ${e.message}\n`);
      return undefined;
    }
    const err = e as NodeJS.ErrnoException;
    if (typeof err.code === 'string') {
      stderrText.write(`gpumem ${command}: cannot read '${file}': ${err.code === 'ENOENT' ? 'no such file' : err.message}\n`);
      return undefined;
    }
    throw e;
  }
}
