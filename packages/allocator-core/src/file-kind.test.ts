/**
 * The words for a path that is not a regular file, which every refusal of one uses (output files,
 * trace inputs, plug-in files).
 */
import { execFileSync } from 'node:child_process';
import { lstatSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nonRegularFileKind } from './file-kind.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-file-kind-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const isLinux = process.platform === 'linux';

describe('nonRegularFileKind', () => {
  it('is undefined for a regular file, and names a folder and a character device', () => {
    const file = join(dir, 'plain.txt');
    writeFileSync(file, 'x');
    expect(nonRegularFileKind(statSync(file))).toBeUndefined();
    const folder = join(dir, 'folder');
    mkdirSync(folder);
    expect(nonRegularFileKind(statSync(folder))).toBe('a folder');
    expect(nonRegularFileKind(statSync('/dev/null'))).toBe('a character device');
  });

  it.skipIf(!isLinux)('names a named pipe and a socket (Linux: mkfifo, a Unix socket)', async () => {
    const fifo = join(dir, 'pipe');
    execFileSync('mkfifo', [fifo]);
    expect(nonRegularFileKind(lstatSync(fifo))).toBe('a named pipe (FIFO)');
    const socket = join(dir, 'sock');
    const server = createServer();
    await new Promise<void>((done) => server.listen(socket, done));
    try {
      expect(nonRegularFileKind(lstatSync(socket))).toBe('a socket');
    } finally {
      await new Promise<void>((done) => server.close(() => done()));
    }
  });

  it('says "not a regular file" for a kind it has no word for', () => {
    const no = () => false;
    const other = { isFile: no, isDirectory: no, isFIFO: no, isSocket: no, isCharacterDevice: no, isBlockDevice: no };
    expect(nonRegularFileKind(other)).toBe('not a regular file');
  });
});
