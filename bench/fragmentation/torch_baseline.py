#!/usr/bin/env python3
"""PyTorch's caching allocator on the fragmentation traces: the baseline of bench/fragmentation/run.js.

Replays each committed trace (bench/fragmentation/traces/*.jsonl.gz, gpumem's JSONL) with
torch.empty / del on a CUDA device, on as many streams as the trace has, under three settings of
PYTORCH_CUDA_ALLOC_CONF, each in its own subprocess (the setting is read once, when the allocator
starts):

  default      PYTORCH_CUDA_ALLOC_CONF unset
  expandable   expandable_segments:True
  max-split    max_split_size_mb:128 (the usual advice for the cycle pattern)

Prints one JSON object: per trace and setting, peak reserved / peak allocated
(torch.cuda.max_memory_reserved / max_memory_allocated), the peaks themselves, the number of
cudaMalloc retries and OOMs (torch.cuda.memory_stats), and the wall time of the replay.

  python3 bench/fragmentation/torch_baseline.py [--traces cycle,two-stream,variable-batch] [--out FILE]
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TRACES = ["cycle", "two-stream", "variable-batch"]
SETTINGS = {
    "default": None,
    "expandable": "expandable_segments:True",
    "max-split": "max_split_size_mb:128",
}


def read_events(name):
    """The events of a committed trace: (action, ptr, bytes, stream) in order."""
    path = os.path.join(HERE, "traces", name + ".jsonl.gz")
    events = []
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        header = json.loads(next(lines))
        if header.get("format") != "gpumem-trace":
            raise ValueError(path + ": not a gpumem trace")
        for line in lines:
            e = json.loads(line)
            if e["action"] in ("alloc", "free"):
                events.append((e["action"], e["ptr"], e["bytes"], e["stream"]))
    return events


def replay(name):
    """Runs in the child: replays one trace and returns its figures."""
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("torch_baseline.py needs a CUDA device")
    events = read_events(name)
    streams = {0: torch.cuda.current_stream()}
    for _, _, _, stream in events:
        if stream not in streams:
            streams[stream] = torch.cuda.Stream()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    live = {}
    ooms = 0
    start = time.perf_counter()
    for action, ptr, nbytes, stream in events:
        if action == "alloc":
            with torch.cuda.stream(streams[stream]):
                try:
                    live[ptr] = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
                except torch.cuda.OutOfMemoryError:
                    ooms += 1
        else:
            # Freed on its allocation stream, as in the traces: the caching allocator reuses it there.
            live.pop(ptr, None)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    live.clear()
    stats = torch.cuda.memory_stats()
    allocated = torch.cuda.max_memory_allocated()
    reserved = torch.cuda.max_memory_reserved()
    return {
        "peakAllocatedBytes": allocated,
        "peakReservedBytes": reserved,
        "reservedOverAllocated": reserved / allocated if allocated else 0.0,
        "cudaMallocRetries": stats.get("num_alloc_retries", 0),
        "ooms": ooms,
        "events": len(events),
        "seconds": seconds,
    }


def run_child(setting, name):
    env = dict(os.environ)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    if SETTINGS[setting] is not None:
        env["PYTORCH_CUDA_ALLOC_CONF"] = SETTINGS[setting]
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", name],
        env=env, capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        return {"error": (done.stderr or done.stdout).strip().splitlines()[-1:] or ["failed"]}
    return json.loads(done.stdout)


def main():
    parser = argparse.ArgumentParser(description="PyTorch's caching allocator on the fragmentation traces")
    parser.add_argument("--traces", default=",".join(TRACES), help="comma-separated traces")
    parser.add_argument("--out", help="also write the JSON here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(replay(args.child)))
        return
    names = [t for t in args.traces.split(",") if t]
    for t in names:
        if t not in TRACES:
            parser.error("unknown trace '%s'; expected one of: %s" % (t, ", ".join(TRACES)))
    result = {"settings": {k: v for k, v in SETTINGS.items()}, "traces": {}}
    for name in names:
        result["traces"][name] = {setting: run_child(setting, name) for setting in SETTINGS}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
