import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { addonCandidates, loadNative, loadNativeFrom, NativeLoadError, prebuildTag } from './index.js';

describe('native loader', () => {
  it('loads the addon built by npm ci', () => {
    const addon = loadNative();
    expect(typeof addon.deviceCount()).toBe('number');
    expect(addonCandidates().some((p) => p.endsWith('gpumem.node'))).toBe(true);
  });

  it('puts GPUMEM_ADDON first', () => {
    process.env.GPUMEM_ADDON = '/opt/elsewhere/gpumem.node';
    try {
      expect(addonCandidates()[0]).toBe('/opt/elsewhere/gpumem.node');
    } finally {
      delete process.env.GPUMEM_ADDON;
    }
  });

  it('throws one error listing every path tried, why each failed, and how to fix it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gpumem-loader-'));
    const broken = join(dir, 'gpumem.node');
    writeFileSync(broken, 'not a shared object');
    let error: unknown;
    try {
      loadNativeFrom([join(dir, 'missing.node'), broken]);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(NativeLoadError);
    const e = error as NativeLoadError;
    expect(e.attempts).toHaveLength(2);
    expect(e.attempts[0]).toEqual({ path: join(dir, 'missing.node'), error: 'not found' });
    expect(e.attempts[1]!.error).toMatch(/invalid ELF header|file too short|not a valid/i);
    expect(e.message).toContain(broken);
    expect(e.message).toMatch(/npm ci/);
    expect(e.message).toMatch(/GPUMEM_ADDON/);
  });

  it('names the prebuild folder by platform, arch and, on Linux, the C library, as the packing script does', async () => {
    expect(prebuildTag({ platform: 'linux', arch: 'x64', libc: 'glibc' })).toBe('linux-x64-glibc');
    expect(prebuildTag({ platform: 'linux', arch: 'arm64', libc: 'musl' })).toBe('linux-arm64-musl');
    expect(prebuildTag({ platform: 'darwin', arch: 'arm64' })).toBe('darwin-arm64');
    // this machine: Node's report says which C library it runs on
    const glibc = (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header.glibcVersionRuntime;
    expect(prebuildTag()).toBe(
      process.platform === 'linux' ? `linux-${process.arch}-${glibc ? 'glibc' : 'musl'}` : `${process.platform}-${process.arch}`,
    );
    // @ts-expect-error: a script of @gpumem/native, without types
    const script = (await import('../../../native/scripts/prebuild-tag.mjs')) as { prebuildTag(): string };
    expect(script.prebuildTag()).toBe(prebuildTag());
    expect(addonCandidates()).toContain(
      join(fileURLToPath(new URL('../../../native', import.meta.url)), 'prebuilds', prebuildTag(), 'gpumem.node'),
    );
  });

  it('says first that there is no prebuilt addon for this machine, and how to build one', () => {
    const missing = join(tmpdir(), 'gpumem-no-such-dir', 'gpumem.node');
    const failure = (tag: string, available: string[]) => {
      try {
        loadNativeFrom([missing], { tag, available });
      } catch (e) {
        expect(e).toBeInstanceOf(NativeLoadError);
        return (e as NativeLoadError).message;
      }
      throw new Error('expected a NativeLoadError');
    };
    const darwin = failure('darwin-arm64', ['linux-x64-glibc']);
    expect(darwin).toMatch(
      /^Could not load the gpumem native addon \(gpumem\.node\): there is no prebuilt addon for darwin-arm64 \(@gpumem\/native carries one for linux-x64-glibc only\)\. Tried:/,
    );
    expect(darwin).toContain('npx gpumem-build-native');
    expect(darwin).toContain('npm install --save-dev cmake-js node-addon-api');
    expect(darwin).toContain(`${missing}: not found`);
    // musl is told why the glibc addon beside it is of no use
    expect(failure('linux-x64-musl', ['linux-x64-glibc'])).toMatch(
      /there is no prebuilt addon for linux-x64-musl \(@gpumem\/native carries one for linux-x64-glibc only, linked against glibc, which musl cannot load\)/,
    );
    expect(failure('linux-x64-glibc', [])).toMatch(/no prebuilt addon for linux-x64-glibc \(@gpumem\/native carries none\)/);
    // a prebuilt addon that is there but does not load: no such clause, the attempts say why
    expect(failure('linux-x64-glibc', ['linux-x64-glibc'])).toMatch(/^Could not load the gpumem native addon \(gpumem\.node\)\. Tried:/);
  });
});
