/** escapeTerminal (./terminal): what a terminal would act on is shown, everything else is left as it is. */
import { describe, expect, it } from 'vitest';
import { escapeTerminal } from './terminal.js';

describe('escapeTerminal', () => {
  it('shows ESC sequences (OSC 52 clipboard write, screen clear) as visible escapes', () => {
    expect(escapeTerminal('a\u001b]52;c;ZWNobw==\u0007b')).toBe('a\\x1b]52;c;ZWNobw==\\x07b');
    expect(escapeTerminal('\u001b[2J\u001b[H')).toBe('\\x1b[2J\\x1b[H');
  });

  it('escapes every C0 control (newline, tab, CR by name), DEL and the C1 controls', () => {
    expect(escapeTerminal('line\nnext\tcell\rback\u0000\u007f')).toBe('line\\nnext\\tcell\\rback\\x00\\x7f');
    expect(escapeTerminal('\u0080\u009b31m\u009f')).toBe('\\x80\\x9b31m\\x9f');
  });

  it('escapes bidi overrides, isolates and marks', () => {
    expect(escapeTerminal('file\u202egnp.exe')).toBe('file\\u202egnp.exe');
    expect(escapeTerminal('\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u200e\u200f\u061c')).toBe(
      '\\u202a\\u202b\\u202c\\u202d\\u2066\\u2067\\u2068\\u2069\\u200e\\u200f\\u061c',
    );
  });

  it('leaves printable text alone, non-ASCII included', () => {
    for (const text of ['', 'layer.0/weight', 'Größe 2.00 MiB', '日本語 ✓', 'back\\slash', '\u00a0nbsp']) {
      expect(escapeTerminal(text)).toBe(text);
    }
  });
});
