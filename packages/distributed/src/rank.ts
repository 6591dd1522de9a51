/**
 * The rank's side of a launch: it reads its place from the environment, waits for the payload,
 * connects its communicator, runs the work and sends the result back. When the work throws, the
 * rank marks the group aborted (so the others stop at their next collective), reports the error
 * to the launcher and exits with code 1.
 * @module
 */
import { cudaDevice, hostDevice, type Device } from '@gpumem/allocator-core';
import type { Communicator } from './communicator.js';
import { attachHostCommunicator } from './host-comm.js';
import { createNcclCommunicator } from './nccl.js';
import { readRankEnv, type ParentMessage, type RankMessage, type RankPlace } from './protocol.js';

export interface RankContext<P> extends RankPlace {
  payload: P;
  /** The rank's device: cuda:N, or the host. */
  deviceHandle: Device;
  /** The group's communicator, connected before the work starts. */
  comm: Communicator;
  /** Sends a message to the launcher's onReport (progress, samples). */
  report(message: unknown): void;
}

function send(message: RankMessage): Promise<void> {
  return new Promise((resolve, reject) => process.send!(message, undefined, {}, (e) => (e ? reject(e) : resolve())));
}

/** The communicator of the rank's place. */
export function connect(place: RankPlace, device: Device): Communicator {
  if (place.backend === 'nccl') {
    if (!place.ncclId) throw new Error('GPUMEM_NCCL_ID is not set: a NCCL rank must be started by launchRanks()');
    return createNcclCommunicator({ uniqueId: Uint8Array.from(Buffer.from(place.ncclId, 'hex')), rank: place.rank, size: place.size, device: place.device });
  }
  if (!place.hostRegion) throw new Error('GPUMEM_HOST_COMM is not set: a host-communicator rank must be started by launchRanks()');
  return attachHostCommunicator({ name: place.hostRegion, rank: place.rank, size: place.size, device, timeoutMs: place.timeoutMs });
}

/**
 * Runs `work` as this process's rank: call it once at the top of a rank's entry module. The
 * communicator is disposed after the work, whatever its outcome.
 */
export function runAsRank<P, R>(work: (ctx: RankContext<P>) => R | Promise<R>): void {
  if (!process.send) throw new Error('runAsRank() needs an IPC channel: a rank must be started by launchRanks()');
  const place = readRankEnv();
  process.once('message', (m: ParentMessage) => {
    let comm: Communicator | undefined;
    void (async () => {
      const deviceHandle = place.device >= 0 ? cudaDevice(place.device) : hostDevice;
      comm = connect(place, deviceHandle);
      const ctx: RankContext<P> = { ...place, payload: m.payload as P, deviceHandle, comm, report: (message) => void send({ type: 'report', message }) };
      const result = await work(ctx);
      await send({ type: 'result', result });
      comm.dispose();
      process.disconnect();
    })().catch(async (e: unknown) => {
      const err = e instanceof Error ? e : new Error(String(e));
      try {
        comm?.abort(`${err.name}: ${err.message}`);
      } catch {
        // the group may be gone already; the launcher stops it either way
      }
      process.stderr.write(`${err.stack ?? err.message}\n`);
      await send({ type: 'error', name: err.name, message: `${err.name}: ${err.message}` }).catch(() => undefined);
      process.exit(1);
    });
  });
}
