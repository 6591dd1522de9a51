"""Text from a file made safe for a terminal: the rule of gpumem's CLI (packages/allocator-core/src/terminal.ts).

A trace's strings, tag names and snapshot frames are data: printed raw, an ESC sequence in them can
clear the screen or write the clipboard (OSC 52), and a bidi override can make a line read other
than it is. Each such character is shown as a visible escape instead. JSON output does not use it."""

from __future__ import annotations

_NAMED = {0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}


def _unsafe(code: int) -> bool:
    """C0 controls, DEL, C1 controls, and the bidi embeddings, overrides, isolates and marks."""
    return (
        code < 0x20
        or 0x7F <= code <= 0x9F
        or code in (0x061C, 0x200E, 0x200F)
        or 0x202A <= code <= 0x202E
        or 0x2066 <= code <= 0x2069
    )


def _escape_char(ch: str) -> str:
    code = ord(ch)
    if not _unsafe(code):
        return ch
    if code in _NAMED:
        return _NAMED[code]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_terminal(text: str) -> str:
    """``text`` with every control character, C1 control and bidi control as a visible escape (``\\n``, ``\\x1b``, ``\\u202e``)."""
    return "".join(_escape_char(ch) for ch in text)


def escape_terminal_lines(text: str) -> str:
    """Text made of lines: each line escaped as by :func:`escape_terminal`, the newlines between them kept."""
    return "\n".join(escape_terminal(line) for line in text.split("\n"))
