/**
 * The addon's communicators as this package declares them (comm-native.ts): the addon built from
 * this tree has every member that the communicators call.
 */
import { describe, expect, it } from 'vitest';
import { commNative } from './comm-native.js';

describe('commNative', () => {
  it('finds every communicator member in the addon, as functions', () => {
    const native = commNative();
    for (const member of [
      native.ncclUniqueId,
      native.NcclComm,
      native.HostComm,
      native.hostCommRegionCreate,
      native.hostCommRegionAbort,
      native.hostCommRegionUnlink,
      native.commStageOut,
      native.commStageIn,
    ])
      expect(typeof member).toBe('function');
  });
});
