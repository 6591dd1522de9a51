import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { addonCandidates, loadNative, loadNativeFrom, NativeLoadError } from './index.js';

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
});
