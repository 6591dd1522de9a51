/**
 * PyTorch's memory snapshots (`torch.cuda.memory._dump_snapshot()`), a pickle told by its first
 * bytes and read whole; the reading itself is `../snapshot/snapshot.ts`.
 * @module
 */
import { parseSnapshot } from '../snapshot/snapshot.js';
import { isPickle } from '../snapshot/unpickle.js';
import type { ByteTraceFormat } from './descriptor.js';

/** PyTorch memory snapshots. */
export const torchSnapshot: ByteTraceFormat = {
  kind: 'bytes',
  name: 'torch-snapshot',
  description: 'a PyTorch memory snapshot (the pickle torch.cuda.memory._dump_snapshot() writes)',
  recognizes: isPickle,
  parse: (data, file, options) => parseSnapshot(data, file, options),
};
