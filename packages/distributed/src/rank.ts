/**
 * The rank's side of a launch: it reads its place from the environment, waits for the payload,
 * connects its communicator, runs the work and sends the result back. When the work throws, the
 * rank marks the group aborted (so the others stop at their next collective), reports the error
 * to the launcher and exits with code 1. A rank dies with its launcher: see {@link dieWithLauncher}.
 * @module
 */
import { cudaDevice, escapeTerminalLines, hostDevice, loadNative, type Device } from '@gpumem/allocator-core';
import { commNative } from './comm-native.js';
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

/** How often a rank checks that its launcher is still its parent. */
const parentCheckMs = 1000;

/**
 * Ties the rank's life to its launcher's, so that killing the launcher (SIGKILL included) leaves
 * no rank running: the kernel kills the rank when its parent dies (Linux's PR_SET_PDEATHSIG, asked
 * for natively), and the parent is checked right after asking, in case the launcher died before.
 * Where the kernel cannot do it, and as a second line where it can, the rank checks every second
 * that its parent is still the launcher and exits if not.
 */
function dieWithLauncher(launcherPid: number): void {
  const gone = () => {
    process.stderr.write(`rank ${process.pid}: its launcher (pid ${launcherPid}) is gone; stopping\n`);
    process.exit(1);
  };
  const native = commNative();
  const state = typeof native.dieWithParent === 'function' ? native.dieWithParent(launcherPid) : 'unsupported';
  if (state === 'orphaned' || process.ppid !== launcherPid) gone();
  setInterval(() => {
    if (process.ppid !== launcherPid) gone();
  }, parentCheckMs).unref();
}

/** The communicator of the rank's place. */
export function connect(place: RankPlace, device: Device): Communicator {
  if (place.backend === 'nccl') {
    if (!place.ncclId) throw new Error('GPUMEM_NCCL_ID is not set: a NCCL rank must be started by launchRanks()');
    return createNcclCommunicator({
      uniqueId: Uint8Array.from(Buffer.from(place.ncclId, 'hex')),
      rank: place.rank,
      size: place.size,
      device: place.device,
    });
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
  if (place.launcherPid !== undefined) dieWithLauncher(place.launcherPid);
  process.once('message', (m: ParentMessage) => {
    let comm: Communicator | undefined;
    void (async () => {
      const deviceHandle = place.device >= 0 ? cudaDevice(place.device) : hostDevice;
      // A rank's kernels and cuBLAS calls run on its device: make it current (the process starts on cuda:0).
      if (place.device >= 0) loadNative().setCurrentDevice(place.device);
      comm = connect(place, deviceHandle);
      const ctx: RankContext<P> = {
        ...place,
        payload: m.payload as P,
        deviceHandle,
        comm,
        report: (message) => void send({ type: 'report', message }),
      };
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
      process.stderr.write(`${escapeTerminalLines(err.stack ?? err.message)}\n`); // the launcher's terminal
      await send({ type: 'error', name: err.name, message: `${err.name}: ${err.message}` }).catch(() => undefined);
      process.exit(1);
    });
  });
}
