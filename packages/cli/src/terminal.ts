/**
 * Where the CLI's text for people goes: stdout or stderr, through {@link escapeTerminalLines}, so
 * that a trace's strings, tag names, snapshot frames, plug-in names and a peer's words cannot
 * drive the terminal (an ESC sequence that clears it or writes the clipboard is shown as `\x1b`).
 * JSON written to stdout does not go through it: JSON escapes what it must, and a program reads it.
 * @module
 */
import { escapeTerminalLines } from '@gpumem/allocator-core';

/** Text for people, escaped on its way out. */
export interface TextOut {
  write(text: string): void;
}

/** `stream` for text meant for a terminal. */
function textOut(stream: NodeJS.WritableStream): TextOut {
  return { write: (text) => void stream.write(escapeTerminalLines(text)) };
}

/** stdout, for text. */
export const stdoutText: TextOut = textOut(process.stdout);
/** stderr, for text: messages, warnings and progress lines. */
export const stderrText: TextOut = textOut(process.stderr);
