#!/usr/bin/env python3
"""How fast this host makes pinned host memory that was never touched, by each way CUDA offers, and
how fast a device-to-host copy then fills it: what bounds a first sleep without a reservation
(docs/sleep.md; sleep_engine pins with `register`).

  python3 bench/sleep/pin_probe.py --gib 16 --threads 8 --repeats 2

Ways, each over GIB of memory in 128 MiB chunks made by THREADS threads at once:
  register   mmap, huge pages advised, faulted in (MADV_POPULATE_WRITE), cudaHostRegister: the engine's
  hostalloc  cudaHostAlloc
  vmm-host   cuMemCreate on the device's host NUMA node, mapped (cuMemAddressReserve, cuMemMap) and
             made accessible to the device and the CPU (cuMemSetAccess): host memory the driver pins as
             it creates it
Each way is timed making the memory, then copying a device tensor of the same size into it (the
copy a sleep makes), then freeing it. Prints a table and writes OUT/pin_probe.json.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import glob
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import GiB, commit, csv_list, markdown_table, utc_now, write_json  # noqa: E402
from rl_loop import positive  # noqa: E402

CHUNK = 128 << 20
WAYS = ("register", "hostalloc", "vmm-host")
MADV_HUGEPAGE = 14
MADV_POPULATE_WRITE = 23


def load_cudart(torch):
    """The CUDA runtime PyTorch loaded (its wheel's, else the toolkit's)."""
    base = os.path.dirname(os.path.dirname(torch.__file__))
    candidates = sorted(glob.glob(os.path.join(base, "nvidia", "*", "lib", "libcudart.so*")))
    candidates += ["libcudart.so", "/usr/local/cuda/lib64/libcudart.so"]
    for name in candidates:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise RuntimeError("no libcudart found")


class MemLocation(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class AllocFlags(ctypes.Structure):
    _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class AllocProp(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", MemLocation),
                ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", AllocFlags)]


class AccessDesc(ctypes.Structure):
    _fields_ = [("location", MemLocation), ("flags", ctypes.c_int)]


LOCATION_DEVICE, LOCATION_HOST_NUMA = 1, 3
ATTRIBUTE_HOST_NUMA_ID = 134


def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what} failed: {rc}")


class Pinner:
    def __init__(self, torch, device):
        self.torch = torch
        self.device = device
        self.rt = load_cudart(torch)
        self.rt.cudaHostRegister.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
        self.rt.cudaHostUnregister.argtypes = [ctypes.c_void_p]
        self.rt.cudaHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]
        self.rt.cudaFreeHost.argtypes = [ctypes.c_void_p]
        self.rt.cudaSetDevice.argtypes = [ctypes.c_int]
        self.cu = ctypes.CDLL("libcuda.so.1")
        u64 = ctypes.c_uint64
        self.cu.cuMemCreate.argtypes = [ctypes.POINTER(u64), ctypes.c_size_t, ctypes.POINTER(AllocProp), u64]
        self.cu.cuMemAddressReserve.argtypes = [ctypes.POINTER(u64), ctypes.c_size_t, ctypes.c_size_t, u64, u64]
        self.cu.cuMemMap.argtypes = [u64, ctypes.c_size_t, ctypes.c_size_t, u64, u64]
        self.cu.cuMemSetAccess.argtypes = [u64, ctypes.c_size_t, ctypes.POINTER(AccessDesc), ctypes.c_size_t]
        self.cu.cuMemUnmap.argtypes = [u64, ctypes.c_size_t]
        self.cu.cuMemRelease.argtypes = [u64]
        self.cu.cuMemAddressFree.argtypes = [u64, ctypes.c_size_t]
        self.cu.cuDeviceGetAttribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int]
        numa = ctypes.c_int(-1)
        self.cu.cuDeviceGetAttribute(ctypes.byref(numa), ATTRIBUTE_HOST_NUMA_ID, device)
        self.numa = max(numa.value, 0)
        self.libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self.libc.mmap.restype = ctypes.c_void_p
        self.libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        self.libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

    # Each way: make(chunks) -> list of (host address, handle), free(made).
    def make_register(self, i):
        addr = self.libc.mmap(None, CHUNK, 0x3, 0x22, -1, 0)  # PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS
        if addr in (None, ctypes.c_void_p(-1).value):
            raise RuntimeError("mmap failed")
        self.libc.madvise(addr, CHUNK, MADV_HUGEPAGE)
        if self.libc.madvise(addr, CHUNK, MADV_POPULATE_WRITE) != 0:
            ctypes.memset(addr, 0, CHUNK)
        check(self.rt.cudaHostRegister(addr, CHUNK, 0), "cudaHostRegister")
        return addr, None

    def free_register(self, made):
        self.rt.cudaHostUnregister(made[0])
        self.libc.munmap(made[0], CHUNK)

    def make_hostalloc(self, i):
        p = ctypes.c_void_p()
        check(self.rt.cudaHostAlloc(ctypes.byref(p), CHUNK, 0), "cudaHostAlloc")
        return p.value, None

    def free_hostalloc(self, made):
        self.rt.cudaFreeHost(made[0])

    def make_vmm_host(self, i):
        prop = AllocProp()
        prop.type = 1  # pinned
        prop.location = MemLocation(LOCATION_HOST_NUMA, self.numa)
        handle, va = ctypes.c_uint64(), ctypes.c_uint64()
        check(self.cu.cuMemCreate(ctypes.byref(handle), CHUNK, ctypes.byref(prop), 0), "cuMemCreate (host NUMA)")
        check(self.cu.cuMemAddressReserve(ctypes.byref(va), CHUNK, 2 << 20, 0, 0), "cuMemAddressReserve")
        check(self.cu.cuMemMap(va.value, CHUNK, 0, handle.value, 0), "cuMemMap")
        access = (AccessDesc * 2)(AccessDesc(MemLocation(LOCATION_DEVICE, self.device), 3),
                                  AccessDesc(MemLocation(LOCATION_HOST_NUMA, self.numa), 3))
        check(self.cu.cuMemSetAccess(va.value, CHUNK, access, 2), "cuMemSetAccess")
        return va.value, handle.value

    def free_vmm_host(self, made):
        va, handle = made
        self.cu.cuMemUnmap(va, CHUNK)
        self.cu.cuMemRelease(handle)
        self.cu.cuMemAddressFree(va, CHUNK)

    def run(self, way, chunks, threads):
        make = getattr(self, "make_" + way.replace("-", "_"))
        free = getattr(self, "free_" + way.replace("-", "_"))
        made = [None] * chunks
        errors = []
        next_chunk = [0]
        lock = threading.Lock()

        def worker():
            self.rt.cudaSetDevice(self.device)  # the primary context current on this thread
            while True:
                with lock:
                    i = next_chunk[0]
                    next_chunk[0] += 1
                if i >= chunks:
                    return
                try:
                    made[i] = make(i)
                except Exception as e:  # noqa: BLE001
                    errors.append(str(e))
                    return

        start = time.perf_counter()
        pool = [threading.Thread(target=worker) for _ in range(threads)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        make_s = time.perf_counter() - start
        if errors:
            for m in made:
                if m is not None:
                    free(m)
            return {"way": way, "error": errors[0]}
        # The copy a sleep makes: a device tensor of the same size into the chunks, one stream.
        torch = self.torch
        src = torch.empty(chunks * CHUNK, dtype=torch.uint8, device=f"cuda:{self.device}")
        src.fill_(7)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for i, (addr, _) in enumerate(made):
            check(self.rt.cudaMemcpyAsync(ctypes.c_void_p(addr), ctypes.c_void_p(src.data_ptr() + i * CHUNK),
                                          ctypes.c_size_t(CHUNK), 2, ctypes.c_void_p(0)), "cudaMemcpyAsync")
        torch.cuda.synchronize()
        copy_s = time.perf_counter() - start
        ok = ctypes.string_at(made[-1][0] + CHUNK - 16, 16) == b"\x07" * 16
        del src
        start = time.perf_counter()
        for m in made:
            free(m)
        free_s = time.perf_counter() - start
        nbytes = chunks * CHUNK
        return {"way": way, "bytes": nbytes, "make_seconds": make_s, "make_gbps": nbytes / make_s / 1e9,
                "copy_seconds": copy_s, "copy_gbps": nbytes / copy_s / 1e9, "free_seconds": free_s, "content_ok": ok}


def main(argv=None):
    p = argparse.ArgumentParser(description="How fast this host pins host memory never touched, by each way CUDA offers.")
    p.add_argument("--gib", type=positive, default=16, help="GiB per way and repeat (default 16)")
    p.add_argument("--threads", type=positive, default=8, help="threads making chunks at once (default 8)")
    p.add_argument("--repeats", type=positive, default=2, help="repeats of each way, interleaved (default 2)")
    p.add_argument("--ways", type=csv_list(WAYS, "ways"), default=list(WAYS), help=f"comma-separated, of {', '.join(WAYS)}")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--out", default=os.path.join(HERE, "out"), help="folder of pin_probe.json (default bench/sleep/out)")
    p.add_argument("--json", help="where to write the JSON (default OUT/pin_probe.json)")
    args = p.parse_args(argv)
    import torch

    torch.cuda.init()
    pinner = Pinner(torch, args.device)
    pinner.rt.cudaMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
    chunks = args.gib * GiB // CHUNK
    results = []
    for r in range(args.repeats):
        for way in args.ways:
            res = pinner.run(way, chunks, args.threads)
            res["repeat"] = r + 1
            results.append(res)
            print(res, flush=True)
    rows = []
    for res in results:
        if "error" in res:
            rows.append((res["way"], str(res["repeat"]), "error", res["error"], "", ""))
        else:
            rows.append((res["way"], str(res["repeat"]), f"{res['make_seconds']:.2f} s", f"{res['make_gbps']:.1f} GB/s",
                         f"{res['copy_gbps']:.1f} GB/s", "yes" if res["content_ok"] else "NO"))
    print(markdown_table(("way", "repeat", "make", "make rate", "D2H copy into it", "content"), rows))
    doc = {"benchmark": "sleep-pin-probe", "date": utc_now(), "commit": commit(), "device": torch.cuda.get_device_name(args.device),
           "gib": args.gib, "threads": args.threads, "chunk_bytes": CHUNK, "results": results}
    print(f"JSON: {write_json(doc, args, 'pin_probe.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
