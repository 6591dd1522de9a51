/**
 * Text from a file or a peer, made safe for a terminal. A trace's strings, tag names, snapshot
 * frames, plug-in names and a peer's abort text are data: printed raw, an ESC sequence in them can
 * clear the screen, move the cursor, set the window title or write the clipboard (OSC 52), and a
 * bidi override can make a line read other than it is. {@link escapeTerminal} shows each such
 * character as a visible escape instead. JSON and HTML output have escapes of their own and do not
 * use it.
 * @module
 */

/**
 * Whether `code` must not reach a terminal raw: C0 controls (tab and newline included: a cell or a
 * quoted name is one line), DEL, C1 controls, and the bidi embeddings, overrides, isolates and
 * marks (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069).
 */
function unsafe(code: number): boolean {
  return (
    code < 0x20 ||
    (code >= 0x7f && code <= 0x9f) ||
    code === 0x061c ||
    code === 0x200e ||
    code === 0x200f ||
    (code >= 0x202a && code <= 0x202e) ||
    (code >= 0x2066 && code <= 0x2069)
  );
}

/** The short forms of the common whitespace controls. */
const named: ReadonlyMap<number, string> = new Map([
  [0x0a, '\\n'],
  [0x0d, '\\r'],
  [0x09, '\\t'],
]);

/**
 * `text` with every control character, C1 control and bidi control shown as a visible escape
 * (`\n`, `\x1b`, `\u202e`); other characters unchanged. The same rule as gpumem_torch's doctor.
 */
export function escapeTerminal(text: string): string {
  let out = '';
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (!unsafe(code)) continue;
    out += text.slice(from, i);
    out += named.get(code) ?? (code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`);
    from = i + 1;
  }
  return from === 0 ? text : out + text.slice(from);
}

/**
 * Text made of lines for a terminal (a table, a verdict, an error message that quotes its input):
 * each line escaped as by {@link escapeTerminal}, the newlines between them kept.
 */
export function escapeTerminalLines(text: string): string {
  return text.split('\n').map(escapeTerminal).join('\n');
}
