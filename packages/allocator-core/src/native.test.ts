import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  addonCandidates,
  InvalidStateError,
  loadNative,
  loadNativeFrom,
  nativeAddonPart,
  NativeLoadError,
  platformPackage,
  prebuildTag,
} from './index.js';

describe('native loader', () => {
  it('loads the addon built by npm ci', () => {
    const addon = loadNative();
    expect(typeof addon.deviceCount()).toBe('number');
    expect(addonCandidates().some((p) => p.endsWith('gpumem.node'))).toBe(true);
  });

  it('hands a package the addon typed as it declares the part it calls, and names a member the addon lacks', () => {
    const part = nativeAddonPart<{ deviceCount(): number }>('a test', ['deviceCount']);
    expect(part.deviceCount()).toBe(loadNative().deviceCount());
    expect(() => nativeAddonPart<{ noSuchMember(): void }>('a test', ['noSuchMember'])).toThrow(InvalidStateError);
    expect(() => nativeAddonPart<{ noSuchMember(): void }>('a test', ['noSuchMember'])).toThrow(
      /^The gpumem addon has no 'noSuchMember', which a test calls: it was built from an older tree; rebuild it/,
    );
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
    // an addon was there and failed: no prebuilt clause, the generic code
    expect(e.code).toBe('GPUMEM_NATIVE_LOAD_FAILED');
    expect(e.platform).toBe(prebuildTag());
  });

  it('names the platform by platform, arch and, on Linux, the C library, and its package as the packing script does', async () => {
    expect(prebuildTag({ platform: 'linux', arch: 'x64', libc: 'glibc' })).toBe('linux-x64-glibc');
    expect(prebuildTag({ platform: 'linux', arch: 'arm64', libc: 'musl' })).toBe('linux-arm64-musl');
    expect(prebuildTag({ platform: 'darwin', arch: 'arm64' })).toBe('darwin-arm64');
    // this machine: Node's report says which C library it runs on
    const glibc = (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header.glibcVersionRuntime;
    expect(prebuildTag()).toBe(
      process.platform === 'linux' ? `linux-${process.arch}-${glibc ? 'glibc' : 'musl'}` : `${process.platform}-${process.arch}`,
    );
    // @ts-expect-error: a script of @gpumem/native, without types
    const script = (await import('../../../native/scripts/prebuild-tag.mjs')) as {
      prebuildTag(): string;
      platformPackage(tag?: string): string;
    };
    expect(script.prebuildTag()).toBe(prebuildTag());
    // glibc is 'gnu' in the package's name, as napi-rs names its platform packages
    expect(platformPackage('linux-x64-glibc')).toBe('@gpumem/native-linux-x64-gnu');
    expect(platformPackage('linux-x64-musl')).toBe('@gpumem/native-linux-x64-musl');
    expect(platformPackage('darwin-arm64')).toBe('@gpumem/native-darwin-arm64');
    for (const tag of ['linux-x64-glibc', 'linux-arm64-musl', 'darwin-arm64', 'win32-x64']) {
      expect(script.platformPackage(tag)).toBe(platformPackage(tag));
    }
    expect(script.platformPackage()).toBe(platformPackage());
  });

  it('says first that there is no prebuilt addon for this platform, with a code naming it, and how to build one', () => {
    const missing = join(tmpdir(), 'gpumem-no-such-dir', 'gpumem.node');
    const failure = (tag: string, available: string[], installed = false) => {
      try {
        loadNativeFrom([missing], { tag, available, installed });
      } catch (e) {
        expect(e).toBeInstanceOf(NativeLoadError);
        return e as NativeLoadError;
      }
      throw new Error('expected a NativeLoadError');
    };
    const darwin = failure('darwin-arm64', ['linux-x64-glibc']);
    expect([darwin.code, darwin.platform]).toEqual(['GPUMEM_NO_PREBUILT', 'darwin-arm64']);
    expect(darwin.message).toMatch(
      /^Could not load the gpumem native addon \(gpumem\.node\): there is no prebuilt addon for darwin-arm64 \(one is published for linux-x64-glibc only\)\. Tried:/,
    );
    expect(darwin.message).toContain('npx gpumem-build-native');
    expect(darwin.message).toContain('npm install --save-dev cmake-js node-addon-api');
    expect(darwin.message).toContain(`${missing}: not found`);
    // musl is told why the glibc addon is of no use
    const musl = failure('linux-x64-musl', ['linux-x64-glibc']);
    expect([musl.code, musl.platform]).toEqual(['GPUMEM_NO_PREBUILT', 'linux-x64-musl']);
    expect(musl.message).toMatch(
      /there is no prebuilt addon for linux-x64-musl \(one is published for linux-x64-glibc only, linked against glibc, which musl cannot load\)/,
    );
    expect(failure('linux-x64-glibc', []).message).toMatch(/no prebuilt addon for linux-x64-glibc \(@gpumem\/native lists none\)/);
    // published for this platform, but its package left out (--omit=optional): named, with how to add it
    const omitted = failure('linux-x64-glibc', ['linux-x64-glibc']);
    expect(omitted.code).toBe('GPUMEM_PREBUILT_NOT_INSTALLED');
    expect(omitted.message).toContain(
      'the prebuilt addon for linux-x64-glibc, @gpumem/native-linux-x64-gnu (an optional dependency of @gpumem/native), is not installed',
    );
    expect(omitted.message).toContain('npm install @gpumem/native-linux-x64-gnu');
    // a prebuilt addon that is there but does not load: no such clause, the attempts say why
    const broken = failure('linux-x64-glibc', ['linux-x64-glibc'], true);
    expect(broken.code).toBe('GPUMEM_NATIVE_LOAD_FAILED');
    expect(broken.message).toMatch(/^Could not load the gpumem native addon \(gpumem\.node\)\. Tried:/);
  });
});
