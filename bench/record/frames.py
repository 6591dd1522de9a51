"""The cost of Python frame capture per allocation (gpumem_torch.record(path, frames=True)).

Drives libgpumem_torch.so's trace path without a GPU: gpumem_trace_simulate records N allocations
and their frees through the path gpumem_malloc / gpumem_free take (the recorder, and the frame hook
when the recording takes frames), in one native loop called from Python with the GIL released, as
a PyTorch op calls the allocator. Each allocation with frames then calls the Python hook (a ctypes
callback: it takes the GIL), which walks out to the innermost user frame.

Cases (each RUNS times, N pairs a run, fewer events than the recorder's buffer so that its writer
thread stays idle while timed; the figure is ns per allocation, median (min-max)):
  no trace            the loop without a recording (what gpumem_malloc pays: an atomic load)
  trace               recording without frames
  trace + hook only   frames on, the hook returning 0 at once: the ctypes callback alone
  trace + frames, dK  frames on, K functions of a torch/ file between the user's line and the
                      library (K = 0, 4, 16; gpumem_torch's simulate() is one more): the walk
  new line each time  frames on, every allocation from a line not seen before (first sightings:
                      the name is formatted and interned), against the same calls without frames
The frame cost is (trace + frames) - (trace).

    GPUMEM_TORCH_LIB=/path/libgpumem_torch.so python3 bench/record/frames.py [--pairs N] [--runs R] [--json PATH]
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bindings", "python"))
sys.path.insert(0, os.path.join(REPO, "bench", "lib"))

import gpumem_torch  # noqa: E402
from gpumem_torch import _frames  # noqa: E402
from gpumem_torch._frames import simulate  # noqa: E402
from output import write_json  # noqa: E402


def torch_like_chain(depth):
    """A function that calls simulate() `depth` frames down, through functions of a file under
    torch/ (skipped by the walk), called from this file's line: the user frame."""
    scope = {"simulate": simulate}
    src = ["def f0(n, size):\n    simulate(n, size)\n"]
    for k in range(1, depth + 1):
        src.append(f"def f{k}(n, size):\n    f{k - 1}(n, size)\n")
    exec(compile("".join(src), "/venv/lib/python3.11/site-packages/torch/_bench_chain.py", "exec"), scope)
    return scope[f"f{depth}"] if depth > 0 else None


def timed(fn, pairs):
    t0 = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t0) / pairs


def measure(case, pairs, runs, trace_dir, frames, body, hook=None):
    per = []
    for _ in range(runs):
        path = os.path.join(trace_dir, "frames-bench.jsonl")
        if frames is None:
            per.append(timed(body, pairs))
            continue
        gpumem_torch.record(path, frames=frames)
        saved = _frames._tagger.tag
        if hook is not None:
            _frames._tagger.tag = hook
        try:
            per.append(timed(body, pairs))
        finally:
            _frames._tagger.tag = saved
            gpumem_torch.stop()
    return {"case": case, "pairs": pairs, "runs": runs, "nsPerAlloc": per, "median": statistics.median(per), "min": min(per), "max": max(per)}


def first_sightings(sites):
    """`sites` functions of a user file, each allocating once from its own line."""
    scope = {"simulate": simulate}
    exec(compile("".join(f"def s{k}():\n    simulate(1, 256)\n" for k in range(sites)), "/home/user/sites.py", "exec"), scope)
    fns = [scope[f"s{k}"] for k in range(sites)]

    def body():
        for f in fns:
            f()

    return body


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # 30000 pairs are 60000 events, fewer than a buffer of the recorder holds (65536): the writer
    # thread, which formats and writes the events in the background, stays idle while a run is
    # timed, so what is timed is the allocating thread's cost (on a busy 2-core machine the writer
    # would otherwise compete for the cores and blur it).
    ap.add_argument("--pairs", type=int, default=30_000, help="allocations (with their frees) a run (default 30000)")
    ap.add_argument("--runs", type=int, default=15, help="runs a case (default 15)")
    ap.add_argument("--json", default=os.path.join(REPO, "bench", "record", "results", "frames-cpu.json"), help="where to write the JSON")
    args = ap.parse_args()
    n, runs = args.pairs, args.runs
    results = []
    with tempfile.TemporaryDirectory() as d:
        # Registers the hook, so that the first case does not pay for it.
        gpumem_torch.record(os.path.join(d, "warm.jsonl"), frames=True)
        simulate(1000, 256)
        gpumem_torch.stop()

        def loop(fn=None):
            return (lambda: simulate(n, 256)) if fn is None else (lambda: fn(n, 256))

        results.append(measure("no trace", n, runs, d, None, loop()))
        results.append(measure("trace", n, runs, d, False, loop()))
        results.append(measure("trace + hook only", n, runs, d, True, loop(), hook=lambda recording, frame: 0))
        for depth in (0, 4, 16):
            results.append(measure(f"trace + frames, d{depth}", n, runs, d, True, loop(torch_like_chain(depth))))
        sites = 1000  # under the 1023 tags a trace keeps, so every one is interned
        off = measure("new line each time, no frames", sites, runs, d, False, first_sightings(sites))
        on = measure("new line each time, frames", sites, runs, d, True, first_sightings(sites))
        results += [off, on]

    # The frame cost of a case: its time less that of the same calls without frames, by medians and
    # by minimums (the least disturbed runs of a shared machine).
    trace = next(r for r in results if r["case"] == "trace")
    for r in results:
        ref = trace if r["case"].startswith("trace +") else off if r is on else None
        if ref is not None:
            r["frameCostMedian"] = r["median"] - ref["median"]
            r["frameCostMin"] = r["min"] - ref["min"]
    print(f"{'case':32} {'ns/alloc median':>16} {'min-max':>18} {'frame cost (median / min)':>26}")
    for r in results:
        extra = f"{r['frameCostMedian']:8.0f} / {r['frameCostMin']:.0f}" if "frameCostMedian" in r else ""
        print(f"{r['case']:32} {r['median']:16.0f} {r['min']:8.0f}-{r['max']:<9.0f} {extra:>20}")
    out = {
        "benchmark": "record-frames",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "library": gpumem_torch.library_path(),
        "note": "ns per allocation (each with its free) through gpumem_trace_simulate; frame cost = case - 'trace' (or - 'new line each time, no frames')",
        "results": results,
    }
    write_json(args.json, out)


if __name__ == "__main__":
    main()
