"""What the sleep benchmarks (sleep_bench.py, rl_loop.py, graph_replay.py) share: each runs its cases
as workers in fresh processes of its own script, reads the `RESULT {json}` line a worker prints last,
prints a Markdown table and writes one JSON document. Only the standard library: the parents run
without PyTorch.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GiB = 1 << 30
RESULT = "RESULT "
# removed from a worker's environment: torch_memory_saver refuses expandable segments, and gpumem
# runs its default strategy ('expandable') with only these two of its variables kept
TORCH_CONF_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING")
KEPT_GPUMEM_VARS = ("GPUMEM_TORCH_LIB", "GPUMEM_COMMIT")


# ---------------------------------------------------------------------------------------------
# Workers


def emit_result(doc):
    """A worker's last line: the parent reads it back (run_worker)."""
    print(RESULT + json.dumps(doc), flush=True)


def free_bytes(torch):
    """The device's free memory (torch.cuda.mem_get_info) once the device is idle."""
    torch.cuda.synchronize()
    return torch.cuda.mem_get_info()[0]


def child_env():
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in TORCH_CONF_VARS and not (k.startswith("GPUMEM_") and k not in KEPT_GPUMEM_VARS)
    }
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _text(stream):
    return stream.decode() if isinstance(stream, bytes) else (stream or "")


class WorkerRun:
    """One worker process: `timed_out`, `returncode` (None when timed out), `stdout` and `stderr` (what
    it wrote, also before a timeout), `results` (its RESULT documents, in order) and `seconds`."""

    def __init__(self, timed_out, returncode, stdout, stderr, seconds):
        self.timed_out = timed_out
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.seconds = seconds
        lines = [] if timed_out else stdout.splitlines()
        self.results = [json.loads(line[len(RESULT):]) for line in lines if line.startswith(RESULT)]

    @property
    def reason(self):
        """The last line of its stderr (300 characters at most): why it failed."""
        return (self.stderr.strip().splitlines() or ["no output"])[-1][:300]


def run_worker(script, args, limit):
    """Runs `script --worker ARGS` in a fresh interpreter with child_env(), for `limit` seconds at most.
    Once it has ended, echoes its output but the RESULT lines, indented; returns a WorkerRun."""
    cmd = [sys.executable, os.path.abspath(script), "--worker", *args]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired as e:
        return WorkerRun(True, None, _text(e.stdout), _text(e.stderr), time.perf_counter() - start)
    seconds = time.perf_counter() - start
    for line in proc.stdout.splitlines():
        if not line.startswith(RESULT):
            print(f"  {line}")
    return WorkerRun(False, proc.returncode, proc.stdout, proc.stderr, seconds)


def check_worker_flags(parser, args, *flags):
    """The hidden flags a parent gives its worker with --worker (run_worker's ARGS): where one is
    missing, parser.error (exit 2) naming them all."""
    if not all(getattr(args, flag) for flag in flags):
        parser.error("--worker needs " + " and ".join(f"--{flag}" for flag in flags))


# ---------------------------------------------------------------------------------------------
# The parent's report


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def commit():
    """The commit measured: GPUMEM_COMMIT where set, else git's HEAD; "unknown" without either."""
    if os.environ.get("GPUMEM_COMMIT"):
        return os.environ["GPUMEM_COMMIT"]
    try:
        return subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def write_json(doc, args, name):
    """Writes `doc` to --json, else to --out's `name`; returns the path."""
    path = args.json or os.path.join(args.out, name)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    return path


def markdown_table(head, rows):
    """A Markdown table of string cells, each column as wide as its widest cell."""
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(head)]
    lines = ["| " + " | ".join(h.ljust(w) for h, w in zip(head, widths)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in rows]
    return "\n".join(lines)


def csv_list(known, what):
    """An argparse type: comma-separated names, each one of `known`."""

    def parse(text):
        names = [s for s in text.split(",") if s]
        unknown = [s for s in names if s not in known]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(unknown) or '(none given)'}; known: {', '.join(known)}")
        return names

    return parse
