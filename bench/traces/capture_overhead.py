#!/usr/bin/env python3
"""What recording an allocation trace costs: the seed GCN (examples/torch/gcn_benchmark.py, 2M
nodes) under the same gpumem strategy with and without GPUMEM_TRACE, one process per run,
interleaved (off, on, off, on, ...) so that drift of the machine hits both alike. Compares the
mean steady-state epoch time (epochs 2..N) of each run; the goal is an overhead under 2%.

  python3 bench/traces/capture_overhead.py                    # 3 repeats x 2, 10 epochs, pool
  python3 bench/traces/capture_overhead.py --repeats 5 --epochs 6 --json out.json

Prints a table and writes JSON (default bench/traces/capture-overhead.json). Exit code 0 when the
median overhead is under --goal percent, 1 when it is not, 2 when a run failed.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BENCH = os.path.join(REPO, "examples", "torch", "gcn_benchmark.py")
sys.path.insert(0, os.path.join(REPO, "bench", "lib"))
from output import write_json  # noqa: E402


def run(args, trace_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEM_") or k == "GPUMEM_TORCH_LIB"}
    env["PYTHONUNBUFFERED"] = "1"
    if trace_path:
        env["GPUMEM_TRACE"] = trace_path
    cmd = [sys.executable, BENCH, "--allocator", args.allocator, "--nodes", str(args.nodes), "--epochs", str(args.epochs)]
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    lines = [line[7:] for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(cmd)} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads(lines[-1])
    out = {
        "trace": bool(trace_path),
        "epoch_ms_mean": result["epoch_ms_mean"],
        "epoch_ms_median": result["epoch_ms_median"],
        "epoch_ms": result["epoch_ms"],
        "process_seconds": round(wall, 2),
        "device": result["device"],
        "torch": result["torch"],
        "config": result["config"],
    }
    if trace_path:
        with open(trace_path) as f:
            header = json.loads(f.readline())
        out["trace_events"] = header.get("eventCount")
        out["trace_bytes"] = os.path.getsize(trace_path)
        os.remove(trace_path)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3, help="runs with and without the trace, each (at least 3)")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--nodes", type=int, default=2_000_000)
    p.add_argument("--allocator", default="pool", choices=["cuda", "uvm", "pool", "async"])
    p.add_argument("--goal", type=float, default=2.0, help="overhead goal in percent (default 2)")
    p.add_argument("--json", default=os.path.join(HERE, "out", "capture-overhead.json"),
                   help="where to write the JSON (default bench/traces/out/capture-overhead.json)")
    args = p.parse_args()
    if args.repeats < 3:
        p.error("--repeats must be at least 3")

    runs = []
    with tempfile.TemporaryDirectory(prefix="gpumem-overhead-") as tmp:
        for i in range(args.repeats):
            for traced in (False, True):
                path = os.path.join(tmp, f"run{i}.jsonl") if traced else None
                try:
                    r = run(args, path)
                except RuntimeError as e:
                    print(f"error: {e}", file=sys.stderr)
                    return 2
                r["repeat"] = i + 1
                runs.append(r)
                print(f"repeat {i + 1} trace {'on ' if traced else 'off'}: {r['epoch_ms_mean']:9.2f} ms/epoch", flush=True)

    off = [r["epoch_ms_mean"] for r in runs if not r["trace"]]
    on = [r["epoch_ms_mean"] for r in runs if r["trace"]]
    # Each repeat's pair compared, then the median over repeats (robust to one noisy pair).
    pairs = [(b - a) / a * 100 for a, b in zip(off, on)]
    overhead = statistics.median(pairs)
    print()
    print(f"seed GCN, {args.nodes:,} nodes, {args.epochs} epochs, allocator {args.allocator} ({runs[0]['device']}, torch {runs[0]['torch']})")
    print(f"{'repeat':>6}  {'off ms/epoch':>12}  {'on ms/epoch':>11}  {'overhead':>8}  {'events':>8}")
    for i, (a, b, d) in enumerate(zip(off, on, pairs)):
        events = [r for r in runs if r["trace"]][i]["trace_events"]
        print(f"{i + 1:>6}  {a:>12.2f}  {b:>11.2f}  {d:>7.2f}%  {events:>8}")
    print(f"median overhead {overhead:+.2f}% (goal < {args.goal}%): {'met' if overhead < args.goal else 'NOT met'}")
    summary = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "command": " ".join(["python3", os.path.relpath(os.path.abspath(__file__), REPO)] + sys.argv[1:]),
        "workload": {"script": "examples/torch/gcn_benchmark.py", "nodes": args.nodes, "epochs": args.epochs, "allocator": args.allocator},
        "device": runs[0]["device"],
        "torch": runs[0]["torch"],
        "off_epoch_ms_mean": off,
        "on_epoch_ms_mean": on,
        "overhead_percent_per_repeat": [round(d, 3) for d in pairs],
        "overhead_percent_median": round(overhead, 3),
        "goal_percent": args.goal,
        "goal_met": overhead < args.goal,
        "runs": runs,
    }
    write_json(args.json, summary, indent=1)
    return 0 if overhead < args.goal else 1


if __name__ == "__main__":
    sys.exit(main())
