#!/usr/bin/env python3
"""Sleep and wake of tagged PyTorch memory: gpumem_torch against torch_memory_saver and a plain
pinned copy, one fresh process per (case, system), on one GPU.

  python3 bench/sleep/sleep_bench.py --out bench/sleep/out            # every case, every system
  python3 bench/sleep/sleep_bench.py --cases keep-16g-8 --systems gpumem,tms-retain --repeats 3
  python3 bench/sleep/sleep_bench.py --list                           # the cases and systems
  python3 bench/sleep/sleep_bench.py --cases keep-wide-64g,keep-16g-8 --systems gpumem,gpumem-reserved,pinned-copy --repeats 3
                                                                      # the first sleep against the link

Cases (the tensors are made, filled with seeded random bytes, then slept and woken 1 + REPEATS
times; the first cycle is the cold one, reported apart):
  keep-16g-8       16 GiB in 8 tensors of 2 GiB, content kept across sleep
  discard-16g-8    the same, content discarded
  keep-mix-1g, keep-mix-4g, keep-mix-64g, discard-mix-1g, discard-mix-4g, discard-mix-64g
                   1, 4 and 64 GiB made of a seeded mix of tensor sizes from 1 MiB to 512 MiB
                   (log-uniform, whole MiB)
  keep-wide-64g    64 GiB of a seeded mix from 1 MiB to 2 GiB (log-uniform, whole MiB): the first sleep's
                   case (a model's weights: many small tensors and a few of GiBs)

Systems:
  gpumem       gpumem_torch.enable() with the default strategy (expandable); the tensors made in
               gpumem_torch.region('bench'); gpumem_torch.sleep(['bench'], keep=...) and wake(['bench']).
               Its first sleep pins the host backup (chunks pinned on worker threads while the
               copies drain the chunks already pinned); later cycles reuse it.
  gpumem-reserved  the same with GPUMEM_SLEEP_RESERVE set to the case's bytes: the backup is pinned in
               the background from the first allocation on; the process waits until it is ready
               (reported as reserve seconds) before the first sleep.
               Both gpumem systems print the first sleep's breakdown (sleep_timing: waiting for the
               device, waiting for pinned memory, queueing the copies, waiting for them, unmapping;
               faulting pages in and registering them, summed over the pinning threads) and, in keep
               cases, time a plain pinned copy of the same tensors in the same process after the
               cycles (the backup pool trimmed first): the reference the first and steady sleeps
               are a percentage of.
  tms          torch_memory_saver, torch hook mode, region('bench', enable_cpu_backup=keep) (its
               default pinned backup, allocated at each pause and freed at each resume);
               pause('bench') and resume('bench')
  tms-retain   the same with retain_cpu_backup = True (the backup kept across resume: its fastest
               setting for repeated cycles); keep cases only
  pinned-copy  keep cases only: PyTorch's own allocator, the same tensors copied to pinned host
               tensors (D2H, "sleep") and back (H2D, "wake") with non-blocking copies: the link's
               bandwidth in the same run; no device memory is released
  torch-free   discard cases only: PyTorch's own allocator; "sleep" deletes the tensors and empties
               the cache, "wake" allocates them again (new addresses)

Each sleep and wake is timed from a synchronised device to the call's return followed by
torch.cuda.synchronize(). Device free memory (torch.cuda.mem_get_info) is read awake, asleep and
woken. Content: every cycle of a keep case compares a checksum per MiB of each tensor (the sum of
its int64 words) with the one taken before the first sleep; cases of at most --clone-limit also
compare every byte with a host copy after the last cycle. Discard cases check, after the last
cycle, that tensors refilled after a wake read back as they did before the sleep.

Before a case, a process checks the host (MemAvailable less 10% of MemTotal must hold the pinned
backup and any host copy) and the device (free memory must hold the tensors and 2 GiB more); a case
that does not fit is skipped with the reason printed. By default tms (not retained) is not run at
64 GiB: it pins and frees 64 GiB at every cycle (minutes); --all runs it.

Prints a table and writes OUT/sleep.json. Exit status: the number of processes that failed (a
skipped case is no failure; content that does not match is).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

from common import REPO, GiB, check_worker_flags, commit, csv_list, emit_result, free_bytes, markdown_table, run_worker, utc_now, write_json

HERE = os.path.dirname(os.path.abspath(__file__))
PEER_SITE = os.path.join(HERE, "out", "peer", "site")  # the unzipped torch_memory_saver wheel (README.md)

MiB = 1 << 20
TAG = "bench"
DEVICE_MARGIN = 2 * GiB  # the CUDA context, checksum temporaries

CASES = {
    "keep-16g-8": {"keep": True, "bytes": 16 * GiB, "tensors": 8},
    "discard-16g-8": {"keep": False, "bytes": 16 * GiB, "tensors": 8},
    "keep-mix-1g": {"keep": True, "bytes": 1 * GiB, "tensors": None},
    "discard-mix-1g": {"keep": False, "bytes": 1 * GiB, "tensors": None},
    "keep-mix-4g": {"keep": True, "bytes": 4 * GiB, "tensors": None},
    "discard-mix-4g": {"keep": False, "bytes": 4 * GiB, "tensors": None},
    "keep-mix-64g": {"keep": True, "bytes": 64 * GiB, "tensors": None},
    "discard-mix-64g": {"keep": False, "bytes": 64 * GiB, "tensors": None},
    "keep-wide-64g": {"keep": True, "bytes": 64 * GiB, "tensors": None, "max_mib": 2048},
}
KEEP_SYSTEMS = ("gpumem", "gpumem-reserved", "tms", "tms-retain", "pinned-copy")
DISCARD_SYSTEMS = ("gpumem", "tms", "torch-free")
SYSTEMS = ("gpumem", "gpumem-reserved", "tms", "tms-retain", "pinned-copy", "torch-free")
# (case, system) left out unless --all, with the reason printed
LEFT_OUT = {
    ("keep-mix-64g", "tms"): "pins and frees 64 GiB at every cycle (minutes a process); --all runs it",
    ("keep-wide-64g", "tms"): "pins and frees 64 GiB at every cycle (minutes a process); --all runs it",
}


def block_sizes(case_name):
    """The tensor sizes of a case, in bytes: equal tensors, or a mix seeded by the case's size
    (log-uniform from 1 MiB to the case's max_mib, default 512 MiB, whole MiB, the last one cut to the total)."""
    case = CASES[case_name]
    total = case["bytes"]
    if case["tensors"]:
        return [total // case["tensors"]] * case["tensors"]
    rng = random.Random(20261128 + total // GiB)
    top = (case.get("max_mib", 512)).bit_length() - 1
    sizes = []
    left = total
    while left > 0:
        size = min(left, max(1, int(2 ** rng.uniform(0, top))) * MiB)
        sizes.append(size)
        left -= size
    return sizes


def systems_of(case_name):
    return KEEP_SYSTEMS if CASES[case_name]["keep"] else DISCARD_SYSTEMS


def meminfo():
    """/proc/meminfo's MemTotal and MemAvailable, in bytes."""
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("MemTotal", "MemAvailable"):
                out[key] = int(rest.split()[0]) * 1024
    return out


def gib(n):
    return f"{n / GiB:.2f} GiB"


# ---------------------------------------------------------------------------------------------
# The worker: one (case, system) in this process.


class Skip(Exception):
    pass


def host_need(case_name, clone_limit):
    """Host bytes a process holds: the pinned backup or pinned copy (keep cases) and the host copy
    of a case within the clone limit."""
    case = CASES[case_name]
    need = 0
    if case["keep"]:
        need += case["bytes"]
        if case["bytes"] <= clone_limit:
            need += case["bytes"]
    return need


def check_host(case_name, clone_limit):
    need = host_need(case_name, clone_limit)
    if need == 0:
        return None
    info = meminfo()
    spare = info["MemAvailable"] - info["MemTotal"] // 10
    if need > spare:
        what = "pinned backup and host copy" if CASES[case_name]["bytes"] <= clone_limit else "pinned backup"
        raise Skip(
            f"needs {gib(need)} of host memory ({what}); MemAvailable less 10% of "
            f"MemTotal is {gib(spare)} (MemTotal {gib(info['MemTotal'])}, MemAvailable {gib(info['MemAvailable'])})"
        )
    return {"need_bytes": need, "spare_bytes": spare, **info}


class System:
    """make(sizes) -> tensors; sleep() -> report or None; wake() -> report or None."""

    name = ""

    def __init__(self, torch, keep):
        self.torch = torch
        self.keep = keep
        self.tensors = []

    def make(self, sizes):
        self.tensors = [self.torch.empty(s, dtype=self.torch.uint8, device="cuda") for s in sizes]

    def details(self):
        return {}


class Gpumem(System):
    name = "gpumem"

    def __init__(self, torch, keep, gm):
        super().__init__(torch, keep)
        self.gm = gm

    def make(self, sizes):
        with self.gm.region(TAG):
            super().make(sizes)

    def sleep(self):
        return self.gm.sleep([TAG], keep=self.keep)

    def wake(self):
        return self.gm.wake([TAG])

    def details(self):
        return {"config": self.gm.config(), "tag_stats": self.gm.tag_stats()}


class Tms(System):
    name = "tms"

    def __init__(self, torch, keep, saver, retain):
        super().__init__(torch, keep)
        self.saver = saver
        self.name = "tms-retain" if retain else "tms"
        if retain:
            saver.retain_cpu_backup = True

    def make(self, sizes):
        with self.saver.region(tag=TAG, enable_cpu_backup=self.keep):
            super().make(sizes)

    def sleep(self):
        self.saver.pause(TAG)

    def wake(self):
        self.saver.resume(TAG)


class PinnedCopy(System):
    name = "pinned-copy"

    def make(self, sizes):
        super().make(sizes)
        start = time.perf_counter()
        self.host = [self.torch.empty(s, dtype=self.torch.uint8, pin_memory=True) for s in sizes]
        self.pin_seconds = time.perf_counter() - start

    def sleep(self):
        for h, t in zip(self.host, self.tensors):
            h.copy_(t, non_blocking=True)

    def wake(self):
        for h, t in zip(self.host, self.tensors):
            t.copy_(h, non_blocking=True)

    def details(self):
        return {"host_pin_seconds": self.pin_seconds}


class TorchFree(System):
    name = "torch-free"

    def make(self, sizes):
        self.sizes = sizes
        super().make(sizes)

    def sleep(self):
        self.tensors = []
        self.torch.cuda.empty_cache()

    def wake(self):
        System.make(self, self.sizes)


def fill(torch, tensors, seed):
    g = torch.Generator(device="cuda")
    for i, t in enumerate(tensors):
        g.manual_seed(seed + i)
        t.view(torch.int32).random_(generator=g)


def checksums(torch, tensors):
    """Per MiB of every tensor, the sum of its int64 words (wrapping; integer sums do not depend on
    the order of the reduction), as one int64 host tensor."""
    parts = [t.view(torch.int64).view(-1, MiB // 8).sum(dim=1) for t in tensors]
    return torch.cat(parts).cpu()


def make_system(name, keep, total):
    """Sets up `name` (before CUDA is initialised where it must) and returns (torch, System)."""
    if name in ("gpumem", "gpumem-reserved"):
        if name == "gpumem-reserved":
            os.environ["GPUMEM_SLEEP_RESERVE"] = str(total)
        sys.path.insert(0, os.path.join(REPO, "bindings", "python"))
        import gpumem_torch

        gpumem_torch.enable()
        import torch

        system = Gpumem(torch, keep, gpumem_torch)
        system.name = name
        return torch, system
    if name in ("tms", "tms-retain"):
        if os.path.isdir(PEER_SITE):
            sys.path.insert(0, PEER_SITE)
        import torch
        from torch_memory_saver import torch_memory_saver

        torch_memory_saver.hook_mode = "torch"
        return torch, Tms(torch, keep, torch_memory_saver, retain=name == "tms-retain")
    import torch

    return torch, (PinnedCopy if name == "pinned-copy" else TorchFree)(torch, keep)


def timed(torch, fn):
    torch.cuda.synchronize()
    start = time.perf_counter()
    report = fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start, report


def worker(args):
    case = CASES[args.case]
    keep = case["keep"]
    sizes = block_sizes(args.case)
    total = sum(sizes)
    result = {
        "case": args.case,
        "system": args.system,
        "keep": keep,
        "bytes": total,
        "tensors": len(sizes),
        "smallest_bytes": min(sizes),
        "largest_bytes": max(sizes),
        "repeats": args.repeats,
    }
    try:
        result["host"] = check_host(args.case, args.clone_limit)
        torch, system = make_system(args.system, keep, total)
        result["torch"] = torch.__version__
        result["device"] = torch.cuda.get_device_name()
        free, device_total = torch.cuda.mem_get_info()
        result["device_total_bytes"] = device_total
        if free < total + DEVICE_MARGIN:
            raise Skip(f"needs {gib(total + DEVICE_MARGIN)} of device memory (tensors and 2 GiB); {gib(free)} is free")
        if args.system in ("tms", "tms-retain"):
            import torch_memory_saver as tms_module

            result["peer"] = {"path": os.path.dirname(tms_module.__file__)}
        system.make(sizes)
        if args.system == "gpumem-reserved":
            result["reserve_seconds"] = wait_reserved(system.gm, total)
            print(f"backup of {gib(total)} reserved {result['reserve_seconds']:.2f} s after the first allocation", flush=True)
        fill(torch, system.tensors, seed=1000)
        reference = checksums(torch, system.tensors)
        clone = [t.cpu() for t in system.tensors] if keep and total <= args.clone_limit else None
        cycles = []
        for c in range(1 + args.repeats):
            awake = free_bytes(torch)
            sleep_s, sleep_report = timed(torch, system.sleep)
            asleep = free_bytes(torch)
            if c == 0:
                result["asleep_details"] = system.details()
                if sleep_report is not None and "timing" in sleep_report:
                    print("first sleep: " + breakdown(sleep_report["timing"]), flush=True)
            wake_s, wake_report = timed(torch, system.wake)
            woken = free_bytes(torch)
            cycle = {
                "sleep_seconds": sleep_s,
                "wake_seconds": wake_s,
                "free_awake_bytes": awake,
                "free_asleep_bytes": asleep,
                "free_woken_bytes": woken,
            }
            if sleep_report is not None:
                cycle["sleep_report"] = sleep_report
            if wake_report is not None:
                cycle["wake_report"] = wake_report
            if keep:
                cycle["content_ok"] = bool(torch.equal(checksums(torch, system.tensors), reference))
            cycles.append(cycle)
            print(
                f"cycle {c}{' (cold)' if c == 0 else ''}: sleep {sleep_s * 1e3:.1f} ms, wake {wake_s * 1e3:.1f} ms, "
                f"free {gib(awake)} -> {gib(asleep)} -> {gib(woken)}"
                + (f", content {'ok' if cycle['content_ok'] else 'DIFFERS'}" if keep else ""),
                flush=True,
            )
        result["cycles"] = cycles
        if clone is not None:
            result["bytes_equal"] = all(torch.equal(t.cpu(), h) for t, h in zip(system.tensors, clone))
        if not keep:
            # after a wake the tensors are usable memory: refilled, they read back as before the sleep
            fill(torch, system.tensors, seed=2000)
            before = checksums(torch, system.tensors)
            system.sleep()
            system.wake()
            fill(torch, system.tensors, seed=2000)
            result["refill_ok"] = bool(torch.equal(checksums(torch, system.tensors), before))
        result["details"] = system.details()
        if keep and isinstance(system, Gpumem):
            system.gm.trim_backup()  # the pinned copy's host memory instead of the pool's
            result["same_process_copy"] = pinned_copy_seconds(torch, system.tensors)
            print(f"pinned copy in this process: {min(result['same_process_copy']) * 1e3:.1f} ms "
                  f"({total / min(result['same_process_copy']) / 1e9:.1f} GB/s)", flush=True)
        result["status"] = "ok" if verified(result) else "content differs"
    except Skip as e:
        result["status"] = "skipped"
        result["reason"] = str(e)
        print(f"skipped: {e}", flush=True)
    emit_result(result)
    return 0 if result["status"] in ("ok", "skipped") else 1


def wait_reserved(gm, total):
    """Seconds until gpumem's backup pool holds `total` bytes (GPUMEM_SLEEP_RESERVE pins in the
    background from the strategy's making, at the first allocation)."""
    start = time.perf_counter()
    while gm.backup_pool_bytes() < total:
        time.sleep(0.01)
    return time.perf_counter() - start


def pinned_copy_seconds(torch, tensors, repeats=3):
    """Seconds of a device-to-pinned-host copy of `tensors` (one pinned buffer, non-blocking copies
    from a synchronised device to a synchronised device), `repeats` times: the link in this process."""
    total = sum(t.numel() for t in tensors)
    host = torch.empty(total, dtype=torch.uint8, pin_memory=True)
    out = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        at = 0
        for t in tensors:
            host[at:at + t.numel()].copy_(t, non_blocking=True)
            at += t.numel()
        torch.cuda.synchronize()
        out.append(time.perf_counter() - start)
    del host
    return out


TIMING_COLUMNS = (
    ("quiesce_seconds", "device"),
    ("backup_wait_seconds", "wait pinned"),
    ("queue_seconds", "queue"),
    ("copy_wait_seconds", "wait copies"),
    ("release_seconds", "unmap"),
    ("fault_seconds", "fault (threads)"),
    ("register_seconds", "register (threads)"),
)


def breakdown(timing):
    parts = [f"{label} {timing[key] * 1e3:.0f} ms" for key, label in TIMING_COLUMNS]
    return ", ".join(parts) + f"; pooled {gib(timing['pooled_bytes'])}, pinned {gib(timing['pinned_bytes'])}"


def verified(result):
    if result["keep"]:
        return all(c["content_ok"] for c in result["cycles"]) and result.get("bytes_equal", True)
    return result.get("refill_ok", False)


# ---------------------------------------------------------------------------------------------
# The parent: one process per (case, system), the table, the JSON.


def run_one(case, system, args, limit):
    run = run_worker(__file__, ["--case", case, "--system", system, "--repeats", str(args.repeats),
                                "--clone-limit", str(args.clone_limit)], limit)
    if run.timed_out:
        print(run.stdout + run.stderr[-3000:], flush=True)
        return {"case": case, "system": system, "status": "timed out", "reason": f"no result within {limit:.0f} s"}
    if not run.results:
        print(run.stderr[-4000:], flush=True)
        return {"case": case, "system": system, "status": "failed", "exit": run.returncode, "reason": run.reason}
    if run.stderr.strip():
        print("  stderr: " + run.stderr.strip()[-1500:].replace("\n", "\n  "), flush=True)
    result = run.results[-1]
    result["process_seconds"] = round(run.seconds, 2)
    return result


def median_span(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)} if values else None


def summarise(result):
    """The figures of a result: measured cycles (all but the first) and the cold one."""
    cycles = result.get("cycles") or []
    if not cycles:
        return None
    measured = cycles[1:] or cycles
    s = {
        "sleep_seconds": median_span([c["sleep_seconds"] for c in measured]),
        "wake_seconds": median_span([c["wake_seconds"] for c in measured]),
        "cold_sleep_seconds": cycles[0]["sleep_seconds"],
        "cold_wake_seconds": cycles[0]["wake_seconds"],
        "free_awake_bytes": statistics.median([c["free_awake_bytes"] for c in measured]),
        "free_asleep_bytes": statistics.median([c["free_asleep_bytes"] for c in measured]),
    }
    s["released_bytes"] = s["free_asleep_bytes"] - s["free_awake_bytes"]
    if result.get("same_process_copy"):
        s["copy_seconds"] = min(result["same_process_copy"])
    if result["keep"]:
        s["sleep_gb_per_s"] = result["bytes"] / s["sleep_seconds"]["median"] / 1e9
        s["wake_gb_per_s"] = result["bytes"] / s["wake_seconds"]["median"] / 1e9
    return s


def first_sleep_table(results):
    """The gpumem systems' first (cold) and steady sleeps as GB/s and as a share of the pinned copy
    timed in the same process, with the first sleep's breakdown."""
    head = ("case", "system", "first sleep ms", "GB/s", "% of copy", "steady % of copy", "reserve s") + tuple(
        label + " ms" for _, label in TIMING_COLUMNS) + ("pooled / pinned GiB",)
    rows = []
    for r in results:
        s = r.get("summary")
        if not s or "copy_seconds" not in s:
            continue
        t = (r["cycles"][0].get("sleep_report") or {}).get("timing")
        cold = s["cold_sleep_seconds"]
        copy = s["copy_seconds"]
        rows.append((
            r["case"], r["system"], f"{cold * 1e3:.0f}", f"{r['bytes'] / cold / 1e9:.1f}", f"{100 * copy / cold:.0f}%",
            f"{100 * copy / s['sleep_seconds']['median']:.0f}%", f"{r['reserve_seconds']:.2f}" if "reserve_seconds" in r else "–",
        ) + tuple(f"{t[key] * 1e3:.0f}" if t else "–" for key, _ in TIMING_COLUMNS) + (
            f"{t['pooled_bytes'] / GiB:.1f} / {t['pinned_bytes'] / GiB:.1f}" if t else "–",))
    return markdown_table(head, rows) if rows else ""


def ms_span(span):
    return f"{span['median'] * 1e3:.1f} ({span['min'] * 1e3:.1f}–{span['max'] * 1e3:.1f})"


def table(results):
    head = ("case", "system", "tensors", "sleep ms", "wake ms", "cold sleep/wake ms", "GB/s sleep/wake",
            "free awake→asleep", "content")
    rows = []
    for r in results:
        s = r.get("summary")
        if not s:
            rows.append((r["case"], r["system"], str(r.get("tensors", "")), r["status"], "", "", "", "", r.get("reason", "")[:110]))
            continue
        rate = f"{s['sleep_gb_per_s']:.1f} / {s['wake_gb_per_s']:.1f}" if "sleep_gb_per_s" in s else "–"
        content = r["status"] if r["status"] != "ok" else ("checked" if r["keep"] else "refill ok")
        rows.append((
            r["case"], r["system"], str(r["tensors"]), ms_span(s["sleep_seconds"]), ms_span(s["wake_seconds"]),
            f"{s['cold_sleep_seconds'] * 1e3:.0f} / {s['cold_wake_seconds'] * 1e3:.0f}", rate,
            f"{s['free_awake_bytes'] / GiB:.1f} → {s['free_asleep_bytes'] / GiB:.1f} GiB", content,
        ))
    return markdown_table(head, rows)


def peer_commit():
    try:
        with open(os.path.join(HERE, "out", "peer", "COMMIT")) as f:
            return f.read().strip()
    except OSError:
        return None


def plan(args):
    """[(case, system)] to run and [(case, system, reason)] left out."""
    runs, left_out = [], []
    for case in args.cases:
        for system in systems_of(case):
            if system not in args.systems:
                continue
            if (case, system) in LEFT_OUT and not args.all:
                left_out.append((case, system, LEFT_OUT[(case, system)]))
                continue
            runs.append((case, system))
    return runs, left_out


def parent(args):
    runs, left_out = plan(args)
    start = time.perf_counter()
    results = []
    for case, system, reason in left_out:
        print(f"== {case} {system}: left out ({reason})", flush=True)
        results.append({"case": case, "system": system, "status": "left out", "reason": reason})
    failed = 0
    for case, system in runs:
        elapsed = time.perf_counter() - start
        remaining = args.deadline - elapsed if args.deadline else None
        if remaining is not None and remaining < 20:
            print(f"== {case} {system}: skipped, {elapsed:.0f} s of the {args.deadline} s deadline spent", flush=True)
            results.append({"case": case, "system": system, "status": "skipped",
                            "reason": f"deadline ({args.deadline} s) reached"})
            continue
        limit = args.timeout or 60 + 4 * CASES[case]["bytes"] / GiB
        if remaining is not None:
            limit = min(limit, remaining)
        print(f"== {case} {system} ({len(block_sizes(case))} tensors, {gib(CASES[case]['bytes'])})", flush=True)
        r = run_one(case, system, args, limit)
        if r.get("cycles"):
            r["summary"] = summarise(r)
        if r["status"] not in ("ok", "skipped"):
            failed += 1
        results.append(r)
    order = {(c, s): i for i, (c, s) in enumerate((c, s) for c in CASES for s in SYSTEMS)}
    results.sort(key=lambda r: order.get((r["case"], r["system"]), 0))
    first = next((r for r in results if r.get("device")), {})
    doc = {
        "benchmark": "sleep",
        "date": utc_now(),
        "commit": commit(),
        "device": first.get("device"),
        "device_total_bytes": first.get("device_total_bytes"),
        "torch": first.get("torch"),
        "host": meminfo(),
        "repeats": args.repeats,
        "peer": {"name": "torch_memory_saver", "commit": peer_commit(), "site": PEER_SITE},
        "results": results,
        "seconds": round(time.perf_counter() - start, 1),
    }
    path = write_json(doc, args, "sleep.json")
    print()
    print(f"sleep and wake, {first.get('device', 'no device')}, torch {first.get('torch', '?')}: "
          f"median (min–max) of {args.repeats} cycles after a cold one; GB/s of the tensors' bytes at the median")
    print(table(results))
    cold_table = first_sleep_table(results)
    if cold_table:
        print("\nfirst sleep against a pinned copy of the same tensors in the same process (% of copy: its time over the sleep's)")
        print(cold_table)
    print(f"\n{len(runs)} processes in {doc['seconds']} s, {failed} failed; JSON: {path}")
    return min(failed, 100)


def main(argv=None):
    p = argparse.ArgumentParser(
        description="Sleep and wake of tagged PyTorch memory: gpumem_torch, torch_memory_saver and a pinned copy.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Cases: " + ", ".join(CASES) + ". Systems: " + ", ".join(SYSTEMS) + ". See the module's text for each.",
    )
    p.add_argument("--out", default=os.path.join(HERE, "out"), help="folder of sleep.json (default bench/sleep/out)")
    p.add_argument("--json", help="where to write the JSON (default OUT/sleep.json)")
    p.add_argument("--cases", type=csv_list(CASES, "case"), default=list(CASES), help="comma-separated (default: all)")
    p.add_argument("--systems", type=csv_list(SYSTEMS, "system"), default=list(SYSTEMS), help="comma-separated (default: all)")
    p.add_argument("--repeats", type=int, default=5, help="measured cycles after the cold one (default 5)")
    p.add_argument("--clone-limit", type=int, default=4 * GiB, help="bytes up to which a keep case is compared byte for byte with a host copy (default 4 GiB)")
    p.add_argument("--timeout", type=float, default=0, help="seconds per process (default 60 + 4 per GiB of the case)")
    p.add_argument("--deadline", type=float, default=0, help="seconds for the whole run; processes that would start later are skipped (default: none)")
    p.add_argument("--all", action="store_true", help="also run the pairs left out by default (tms at 64 GiB keep)")
    p.add_argument("--list", action="store_true", help="print the cases (sizes) and systems, then exit")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--case", choices=list(CASES), help=argparse.SUPPRESS)
    p.add_argument("--system", choices=list(SYSTEMS), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be at least 1")
    if args.list:
        for name in CASES:
            sizes = block_sizes(name)
            print(f"{name:<16} {'keep' if CASES[name]['keep'] else 'discard':<8} {gib(sum(sizes)):>10} in {len(sizes):>4} tensors "
                  f"({min(sizes) // MiB}–{max(sizes) // MiB} MiB); systems {', '.join(systems_of(name))}")
        return 0
    if args.worker:
        check_worker_flags(p, args, "case", "system")
        return worker(args)
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
