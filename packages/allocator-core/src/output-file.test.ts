/**
 * The one output writer: regular files only, replaced atomically (a new inode, the old mode),
 * devices, FIFOs, sockets and folders refused untouched, every error naming the file, nothing left
 * behind on failure.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRoot, leftovers, notRoot, smallTmpfs } from '../../../tests/output-fixtures.js';
import { isSameFile, OutputFile, OutputFileError, writeOutputFile } from './output-file.js';

const dir = mkdtempSync(join(tmpdir(), 'gpumem-output-file-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The OutputFileError `fn` throws. */
function refusal(fn: () => void): OutputFileError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(OutputFileError);
    expect((e as OutputFileError).code).toBe('GPUMEM_OUTPUT_FILE');
    return e as OutputFileError;
  }
  throw new Error('expected an OutputFileError');
}

describe('OutputFile: what it replaces', () => {
  it('writes a new file with 0666 less the umask, and replaces an old one keeping its mode', () => {
    const out = join(dir, 'result.json');
    writeOutputFile(out, '{"a":1}\n');
    const umask = process.umask();
    expect(statSync(out).mode & 0o777).toBe(0o666 & ~umask);
    chmodSync(out, 0o600);
    writeOutputFile(out, '{"a":2}\n');
    expect(readFileSync(out, 'utf8')).toBe('{"a":2}\n');
    expect(statSync(out).mode & 0o777).toBe(0o600);
    expect(leftovers(dir)).toEqual([]);
  });

  it('a hard link gets a new inode: the other name keeps its bytes', () => {
    const precious = join(dir, 'precious.jsonl');
    const hard = join(dir, 'hard.jsonl');
    writeFileSync(precious, 'precious\n');
    linkSync(precious, hard);
    writeOutputFile(hard, 'new trace\n');
    expect(readFileSync(precious, 'utf8')).toBe('precious\n');
    expect(readFileSync(hard, 'utf8')).toBe('new trace\n');
    expect(isSameFile(precious, hard)).toBe(false);
  });

  it('a symbolic link is followed: the file it names is replaced, the link stays a link', () => {
    const real = join(dir, 'real.json');
    const link = join(dir, 'link.json');
    writeFileSync(real, 'old\n');
    symlinkSync(real, link);
    expect(isSameFile(real, link)).toBe(true);
    writeOutputFile(link, 'new\n');
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readFileSync(real, 'utf8')).toBe('new\n');
    const dangling = join(dir, 'dangling.json');
    symlinkSync(join(dir, 'missing', 'target.json'), dangling);
    expect(refusal(() => writeOutputFile(dangling, 'x')).message).toMatch(
      /dangling\.json.*symbolic link to .*target\.json, which does not exist/,
    );
  });

  it('the null device takes the bytes and stays the null device', () => {
    writeOutputFile('/dev/null', 'anything');
    expect(statSync('/dev/null').isCharacterDevice()).toBe(true);
  });
});

describe('OutputFile: what it refuses, untouched', () => {
  let server: Server;
  const socket = join(dir, 'socket');
  beforeAll(async () => {
    server = createServer();
    await new Promise<void>((done) => server.listen(socket, done));
  });
  afterAll(() => new Promise<void>((done) => server.close(() => done())));

  it('a folder, a FIFO and a socket', () => {
    const folder = join(dir, 'folder');
    mkdirSync(folder);
    expect(refusal(() => writeOutputFile(folder, 'x')).message).toMatch(/folder.*: is a folder/);
    const fifo = join(dir, 'pipe');
    execFileSync('mkfifo', [fifo]);
    expect(refusal(() => writeOutputFile(fifo, 'x')).message).toMatch(/pipe.*: is a named pipe \(FIFO\)/);
    expect(statSync(fifo).isFIFO()).toBe(true);
    expect(refusal(() => writeOutputFile(socket, 'x')).message).toMatch(/socket.*: is a socket/);
    expect(statSync(socket).isSocket()).toBe(true);
    expect(leftovers(dir)).toEqual([]);
  });

  it.skipIf(!isRoot)(`a character device (/dev/full's numbers) and a link to it${notRoot}`, () => {
    const device = join(dir, 'full-device');
    execFileSync('mknod', [device, 'c', '1', '7']);
    const error = refusal(() => writeOutputFile(device, 'x'));
    expect(error.message).toMatch(/full-device.*: is a character device/);
    expect(error.path).toBe(device);
    const link = join(dir, 'to-device');
    symlinkSync(device, link);
    expect(refusal(() => writeOutputFile(link, 'x')).message).toMatch(/is a character device/);
    expect(statSync(device).isCharacterDevice()).toBe(true);
    expect(statSync(device).rdev).toBe(statSync('/dev/full').rdev);
  });

  it('a NUL byte in the name, a missing folder, and a parent that is a file', () => {
    const nul = refusal(() => writeOutputFile(join(dir, 'trace\0.evil.jsonl'), 'x'));
    expect(nul.message).toMatch(/contains a NUL byte/);
    expect(existsSync(join(dir, 'trace'))).toBe(false);
    expect(refusal(() => writeOutputFile(join(dir, 'missing', 'out.json'), 'x')).message).toMatch(/the folder .*missing does not exist/);
    const file = join(dir, 'plain.txt');
    writeFileSync(file, 'x');
    expect(refusal(() => writeOutputFile(join(file, 'out.json'), 'x')).message).toMatch(/plain\.txt is a file, not a folder/);
  });
});

describe('OutputFile: streaming and failures', () => {
  it('a streamed file appears at commit; a discarded one never, the old content kept', () => {
    const out = join(dir, 'stream.jsonl');
    writeFileSync(out, 'previous\n');
    const file = OutputFile.open(out);
    file.write('{"a":1}\n');
    file.write(new TextEncoder().encode('{"a":2}\n'));
    expect(readFileSync(out, 'utf8')).toBe('previous\n');
    file.discard();
    expect(readFileSync(out, 'utf8')).toBe('previous\n');
    expect(leftovers(dir)).toEqual([]);
    const again = OutputFile.open(out);
    again.write('{"a":3}\n');
    again.commit();
    expect(readFileSync(out, 'utf8')).toBe('{"a":3}\n');
    expect(refusal(() => again.write('late')).message).toMatch(/already completed or discarded/);
  });

  const built = fileURLToPath(new URL('../dist/output-file.js', import.meta.url));
  const notBuilt = existsSync(built) ? '' : ' (skipped: packages/allocator-core is not built: npm run build)';

  it.skipIf(notBuilt !== '')(`a write past the file size limit (EFBIG) keeps the previous file whole${notBuilt}`, () => {
    const folder = join(dir, 'limited');
    mkdirSync(folder);
    const out = join(folder, 'report.html');
    writeFileSync(out, 'previous report\n');
    // ulimit -f 64: at most 64 KiB a file; SIGXFSZ ignored, so the write fails with EFBIG instead of killing the process
    const script = `import(${JSON.stringify(pathToFileURL(built).href)}).then((m) => m.writeOutputFile(${JSON.stringify(out)}, "x".repeat(1 << 20)))`;
    const r = spawnSync('bash', ['-c', `trap '' XFSZ; ulimit -f 64; exec "${process.execPath}" -e '${script}'`], { encoding: 'utf8' });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/cannot write ".*report\.html": writing failed \(EFBIG: .*\); its previous content is kept/);
    expect(readFileSync(out, 'utf8')).toBe('previous report\n');
    expect(readdirSync(folder)).toEqual(['report.html']);
  });

  // A real full disk: a 64 KiB tmpfs.
  const { folder: full, mounted, skipNote: noMount } = smallTmpfs(dir, '64k');

  it.skipIf(!mounted)(`a full disk (ENOSPC) names the file, keeps the previous one and leaves nothing${noMount}`, () => {
    const out = join(full, 'trace.jsonl');
    writeFileSync(out, 'previous trace\n');
    const file = OutputFile.open(out);
    const error = refusal(() => {
      for (let i = 0; i < 64; i++) file.write('x'.repeat(4096));
    });
    expect(error.errno).toBe('ENOSPC');
    expect(error.message).toMatch(/cannot write ".*trace\.jsonl": writing failed \(ENOSPC: .*\); its previous content is kept/);
    expect(readFileSync(out, 'utf8')).toBe('previous trace\n');
    expect(readdirSync(full)).toEqual(['trace.jsonl']);
  });
});
