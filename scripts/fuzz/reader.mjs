// The reader the trace fuzzer checks: @gpumem/trace's readTrace (every format, plain or compressed,
// told apart by its first bytes), built, as users run it. Its typed errors are TraceFormatError (a
// malformed file; the snapshot's and the pickle's errors extend it) and TraceFileError (a path that
// cannot be read as a trace).
import { readTrace, TraceFileError, TraceFormatError } from '@gpumem/trace';

export const read = (path, options) => readTrace(path, options);
export const typedErrors = [TraceFormatError, TraceFileError];
