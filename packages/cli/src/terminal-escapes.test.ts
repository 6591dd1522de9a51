/**
 * Strings from a file reach the terminal escaped (./terminal): a trace whose source, tag names and
 * file name carry ESC sequences (OSC 52 clipboard write, screen clear), C1 controls and a bidi
 * override, run through `gpumem replay` and `gpumem doctor` (built CLI: npx tsc -b tsconfig.json).
 * The text shows each as a visible escape; the JSON on stdout is the same as without the escaping
 * (JSON escapes what it must and a program reads it).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const run = (args: string[]) =>
  spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', env: { ...process.env, CUDA_VISIBLE_DEVICES: '', GPUMEM_PLUGINS: '' } });
const dir = mkdtempSync(join(tmpdir(), 'gpumem-cli-escapes-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const clipboard = '\u001b]52;c;cm0gLXJmIH4=\u0007';
const clear = '\u001b[2J\u001b[H';
const csi = '\u009b31m';
const override = '\u202e';
/** What a terminal would act on: C0 controls other than newline, DEL, C1 controls, bidi controls. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: the test looks for control characters on purpose
const raw = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

const tags = ['other', `forward${clear}`, `weights${clipboard}`, `opt${csi}${override}`];
const header = { format: 'gpumem-trace', version: 1, source: `evil${clipboard}`, tags, eventCount: 6 };
const events = [
  ['alloc', 4096, 4 << 20, 1],
  ['alloc', 4096 + (4 << 20), 8 << 20, 2],
  ['alloc', 4096 + (12 << 20), 2 << 20, 3],
  ['free', 4096, 4 << 20, 1],
  ['free', 4096 + (4 << 20), 8 << 20, 2],
  ['free', 4096 + (12 << 20), 2 << 20, 3],
] as const;
const trace = join(dir, `trace${clear}.jsonl`);
const lines = [
  JSON.stringify(header),
  ...events.map(([action, ptr, bytes, tag], i) => JSON.stringify({ timeNs: i * 1000, action, ptr, bytes, stream: 0, tag })),
];
writeFileSync(trace, lines.map((l) => `${l}\n`).join(''));

describe('text from a file reaches the terminal escaped', () => {
  it('gpumem replay: the table, the tags and the file name show escapes, and so does a malformed trace in its error', () => {
    const r = run(['replay', trace, '--allocators', 'host']);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).not.toMatch(raw);
    expect(r.stderr).not.toMatch(raw);
    expect(r.stdout).toContain('trace\\x1b[2J\\x1b[H.jsonl');
    const bad = join(dir, `bad${clipboard}.jsonl`);
    writeFileSync(bad, `${JSON.stringify(header)}\n{"timeNs":0,"action":"alloc${clear}","ptr":1,"bytes":1}\n`);
    const e = run(['replay', bad, '--allocators', 'host']);
    expect(e.status).not.toBe(0);
    expect(e.stderr).not.toMatch(raw);
    expect(e.stderr).toContain('\\x1b]52;c;');
  });

  it('gpumem doctor: the verdict text shows escapes; its JSON on stdout keeps the strings as JSON has them', () => {
    const text = run(['doctor', trace, '--capacity', '1GiB']);
    expect(text.status, text.stderr).toBe(0);
    expect(text.stdout).not.toMatch(raw);
    expect(text.stdout).toContain('\\x1b[2J');
    const json = run(['doctor', trace, '--capacity', '1GiB', '--json', '-']);
    expect(json.status, json.stderr).toBe(0);
    expect(json.stderr).not.toMatch(raw);
    // JSON.stringify writes ESC as \u001b; the parsed file name is the file name itself
    const parsed = JSON.parse(json.stdout) as { file: string };
    expect(parsed.file).toBe(trace);
  });
});
