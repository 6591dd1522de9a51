/**
 * A rank of a job that another launcher started (torchrun, srun, mpirun): it joins the job's TCP
 * store at MASTER_ADDR:MASTER_PORT ({@link readEnvRendezvous}), takes cuda:LOCAL_RANK as its device
 * where it runs on a GPU, and connects the group's communicator: NCCL with the unique id rank 0
 * makes and sends over the store, or the host communicator over TCP.
 * @module
 */
import { cudaDevice, deviceCount, hostDevice, loadNative, type Device } from '@gpumem/allocator-core';
import type { CommBackend, Communicator } from './communicator.js';
import type { EnvRendezvous } from './env-rendezvous.js';
import { createNcclCommunicator, ncclUniqueId } from './nccl.js';
import type { RankPlace } from './protocol.js';
import { connectTcpCommunicator } from './tcp-communicator.js';
import { TcpStore } from './tcp-store.js';

export interface JoinJobOptions {
  backend: CommBackend;
  /**
   * Whether the rank's buffers live on its GPU (cuda:localRank). Always so with 'nccl'; with
   * 'host', false (default) keeps them on the host.
   */
  onGpu?: boolean;
  /** The longest a host-communicator collective waits for the other ranks; 0 (default): no limit. */
  timeoutMs?: number;
  /**
   * How long each wait of joining may take: the store, NCCL's id, the host communicator (default
   * 60,000 ms, or `timeoutMs` when that is shorter).
   */
  joinTimeoutMs?: number;
  /** Every rank must give the same (default: GPUMEM_RENDEZVOUS_TOKEN, when set). */
  token?: string | undefined;
}

/** A rank of an external job, joined. */
export interface JobRank {
  /** Its place, as a launched rank would have it (no NCCL id or shared region: the store carried them). */
  place: RankPlace;
  deviceHandle: Device;
  comm: Communicator;
  /** The job's store: for barriers and for gathering results on rank 0. */
  store: TcpStore;
  /** Disposes the communicator and closes the store (saying goodbye, so the others see no failure). */
  leave(): Promise<void>;
}

const defaultJoinTimeoutMs = 60_000;

/**
 * NCCL's unique id, made by `make` on rank 0 only and sent to every rank over the store; a wait
 * past `timeoutMs` (0: none) stops the group.
 */
export async function exchangeNcclId(store: TcpStore, make: () => Uint8Array, timeoutMs = 0): Promise<Uint8Array> {
  const id = store.rank === 0 ? make() : undefined;
  if (id !== undefined && id.byteLength !== 128)
    throw new RangeError(`Expected NCCL's 128-byte unique id but received ${id.byteLength} bytes`);
  const received = await store.broadcast("NCCL's unique id", id, timeoutMs);
  if (received.byteLength !== 128)
    throw new RangeError(`rank ${store.rank} received ${received.byteLength} bytes for NCCL's unique id, not 128`);
  return Uint8Array.from(received);
}

/** The device of a rank: cuda:localRank, checked against the GPUs of this node. */
function rankDevice(rendezvous: EnvRendezvous): number {
  const gpus = deviceCount();
  if (rendezvous.localRank >= gpus) {
    throw new RangeError(
      `rank ${rendezvous.rank} has local rank ${rendezvous.localRank} (${rendezvous.source}), but this node has ${gpus} CUDA device${gpus === 1 ? '' : 's'}: start at most ${gpus} process${gpus === 1 ? '' : 'es'} per node, or use the 'host' communicator on the host`,
    );
  }
  return rendezvous.localRank;
}

/** Joins the job `rendezvous` describes; every rank calls it with the same backend. */
export async function joinJob(rendezvous: EnvRendezvous, o: JoinJobOptions): Promise<JobRank> {
  const { backend, timeoutMs = 0, token = process.env.GPUMEM_RENDEZVOUS_TOKEN } = o;
  const joinTimeoutMs = o.joinTimeoutMs ?? (timeoutMs > 0 ? Math.min(timeoutMs, defaultJoinTimeoutMs) : defaultJoinTimeoutMs);
  if (backend !== 'nccl' && backend !== 'host')
    throw new RangeError(`Expected 'nccl' or 'host' for backend but received ${String(backend)}`);
  const device = backend === 'nccl' || o.onGpu ? rankDevice(rendezvous) : -1;
  const { rank, size } = rendezvous;
  const store = await TcpStore.join({ rank, size, host: rendezvous.masterAddr, port: rendezvous.masterPort, joinTimeoutMs, token });
  let comm: Communicator;
  try {
    if (device >= 0) loadNative().setCurrentDevice(device);
    if (backend === 'nccl') {
      const uniqueId = await exchangeNcclId(store, ncclUniqueId, joinTimeoutMs);
      comm = createNcclCommunicator({ uniqueId, rank, size, device });
    } else {
      comm = await connectTcpCommunicator(store, {
        device: device >= 0 ? cudaDevice(device) : hostDevice,
        timeoutMs,
        joinTimeoutMs,
        token,
      });
    }
  } catch (e) {
    await store.abort(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
    throw e;
  }
  const deviceHandle = device >= 0 ? cudaDevice(device) : hostDevice;
  return {
    place: { rank, size, device, backend, timeoutMs },
    deviceHandle,
    comm,
    store,
    leave: async () => {
      comm.dispose();
      await store.close();
    },
  };
}
