"""The out-of-memory report's event ring on the hot path, measured natively on a GPU.

Builds bench/torch/oom_ring_bench.cpp (a C++ loop over libgpumem_torch.so's gpumem_malloc /
gpumem_free, the entry points PyTorch calls) and runs it once per (strategy, ring window) setting,
the settings interleaved in a shuffled order each repeat, one fresh process each. Prints a table of
nanoseconds per malloc+free pair (median over every round of every process, with the spread of the
per-process medians) and the ring's cost against GPUMEM_OOM_WINDOW=0, and writes the JSON.

    python3 bench/torch/oom-ring.py [--out FILE.json] [--repeats 5] [--rounds 10] [--pairs 200000]
        [--held 256] [--strategies pool,expandable] [--windows 0,256,65536] [--cpu N]

Needs a CUDA device and native/build/Release/libgpumem_torch.so (or GPUMEM_TORCH_LIB)."""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "lib"))
from output import write_json  # noqa: E402


def build(work: Path) -> Path:
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if compiler is None:
        sys.exit("oom-ring: no C++ compiler (set CXX)")
    binary = work / "oom_ring_bench"
    source = ROOT / "bench" / "torch" / "oom_ring_bench.cpp"
    subprocess.run([compiler, "-O2", "-std=c++17", str(source), "-o", str(binary), "-ldl"], check=True)
    return binary


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench/torch/results/oom-ring.json")
    ap.add_argument("--repeats", type=int, default=5, help="processes per setting (default 5)")
    ap.add_argument("--rounds", type=int, default=10, help="timed rounds per process (default 10)")
    ap.add_argument("--pairs", type=int, default=200000, help="malloc+free pairs per round (default 200000)")
    ap.add_argument("--held", type=int, default=256, help="blocks kept live during the rounds (default 256)")
    ap.add_argument("--strategies", default="pool,expandable")
    ap.add_argument("--windows", default="0,256,65536", help="GPUMEM_OOM_WINDOW values; 0 is off (default 0,256,65536)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cpu", type=int, help="run every process on this one CPU (taskset): the same core and cache for every setting")
    a = ap.parse_args()
    lib = os.environ.get("GPUMEM_TORCH_LIB") or str(ROOT / "native" / "build" / "Release" / "libgpumem_torch.so")
    if not Path(lib).is_file():
        sys.exit(f"oom-ring: {lib} does not exist (npm run build:native, or set GPUMEM_TORCH_LIB)")
    strategies = [s for s in a.strategies.split(",") if s]
    windows = [int(w) for w in a.windows.split(",") if w]
    settings = [(s, w) for s in strategies for w in windows]
    rng = random.Random(a.seed)
    runs: dict = {f"{s}/{w}": [] for s, w in settings}
    with tempfile.TemporaryDirectory() as tmp:
        binary = build(Path(tmp))
        for rep in range(a.repeats):
            order = settings[:]
            rng.shuffle(order)
            for s, w in order:
                env = dict(os.environ, GPUMEM_ALLOCATOR=s, GPUMEM_OOM_WINDOW=str(w))
                pin = [] if a.cpu is None else ["taskset", "-c", str(a.cpu)]
                p = subprocess.run(pin + [str(binary), lib, str(a.rounds), str(a.pairs), str(a.held)],
                                   env=env, capture_output=True, text=True, timeout=300)
                if p.returncode != 0:
                    sys.exit(f"oom-ring: {s} window {w}: exit {p.returncode}: {p.stderr.strip()}")
                runs[f"{s}/{w}"].append(json.loads(p.stdout.strip().splitlines()[-1])["ns_per_pair"])
            print(f"repeat {rep + 1}/{a.repeats} done", file=sys.stderr)
    rows = []
    for s, w in settings:
        per_process = [statistics.median(r) for r in runs[f"{s}/{w}"]]
        every = [x for r in runs[f"{s}/{w}"] for x in r]
        rows.append({"strategy": s, "window": w, "median_ns": statistics.median(every),
                     "process_medians_ns": per_process, "min_ns": min(per_process), "max_ns": max(per_process)})
    base = {r["strategy"]: r["median_ns"] for r in rows if r["window"] == 0}
    print(f"{'strategy':12} {'window':>8} {'ns/pair':>9} {'spread (process medians)':>26} {'vs off':>9}")
    for r in rows:
        off = base.get(r["strategy"])
        r["vs_off_ns"] = None if off is None else r["median_ns"] - off
        delta = "" if off is None or r["window"] == 0 else f"{r['vs_off_ns']:+.1f} ns"
        print(f"{r['strategy']:12} {r['window']:>8} {r['median_ns']:>9.1f} {r['min_ns']:>12.1f} – {r['max_ns']:<11.1f} {delta:>9}")
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    out = {"benchmark": "oom-ring", "command": " ".join(sys.argv), "gpu": gpu, "library": lib, "cpu": a.cpu,
           "repeats": a.repeats, "rounds": a.rounds, "pairs": a.pairs, "held": a.held, "rows": rows}
    write_json(a.out, out, log=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
