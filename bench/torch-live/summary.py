#!/usr/bin/env python3
"""The results of bench/torch-live/run.sh: one JSON line per process into results.jsonl, and the
table and verdicts over them.

  python3 bench/torch-live/summary.py table OUT/results.jsonl [MORE.jsonl[.gz] ...] [--rtol 1e-4]
  python3 bench/torch-live/summary.py record --log LOG --exit CODE --wall SECONDS --program P \\
      --config C --repeat R --steps N --warmup W [--commit SHA]

`record` prints the JSON line of one process from its log (and a note on stderr); its exit status
is 1 when the process failed.

Per program (and step count) and configuration, over its repeats: peak reserved GiB (median),
reserved/allocated (median of the runs' ratios), median step ms (the median of the runs' medians;
in brackets the fastest and slowest measured step of all runs) and whether every step's loss
matches PyTorch's default run's: the first successful torch-default run of the same program and
steps is the reference, and a value matches when it differs from the reference's by at most
--rtol (default 1e-4) of the larger of the two. The torch-default repeats are compared with it as
well: their deviation is the program's own run-to-run noise.

The verdict per program: does some gpumem strategy, with every run successful and every loss
matching, reserve no more than torch-expandable (medians) at a median step time no more than
torch-default's + 2%? A 2% comparison needs runs that agree: where the medians of torch-default's
runs, or of a strategy's, differ by more than 10% (the slowest over the fastest), that strategy's
time is not established and it counts as undecided, not as a winner or a loser; the verdict then
says which strategies meet the memory limit.
"""

import argparse
import gzip
import json
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from run import CONFIGS  # noqa: E402

DEFAULT_RTOL = 1e-4
STEP_SLACK = 0.02  # gpumem's median step may be this much slower than torch-default's
RUN_SPREAD = 0.10  # runs whose medians differ by more than this (slowest / fastest - 1) time nothing to 2%
GIB = 1 << 30
REQUIRED_KEYS = ("program", "config", "repeat", "steps", "warmup", "ok")


def result_line(log_text, exit_code, wall_s, program, config, repeat, steps, warmup, commit=None):
    """The JSON line of one process: run.py's RESULT line (the last) with the exit status, the
    process's wall time and the commit; or, when it failed or printed none, a line with ok false
    and the end of its log."""
    base = {"program": program, "config": config, "repeat": repeat, "steps": steps, "warmup": warmup,
            "exit": exit_code, "wall_s": wall_s, "commit": commit}
    results = [line[len("RESULT "):] for line in log_text.splitlines() if line.startswith("RESULT ")]
    if exit_code == 0 and results:
        line = json.loads(results[-1])
        line.update(base)
        line["ok"] = True
        return line
    why = "timed out" if exit_code in (124, 137) else f"exit {exit_code}" if exit_code else "no RESULT line"
    base.update({"ok": False, "error": f"{why}: {log_text[-2000:]}"})
    return base


def describe(line):
    """One line about one process, for the log of a run."""
    if not line["ok"]:
        return f"failed: {line['error'][-600:].rstrip()}"
    return (f"{line['peak_reserved_bytes'] / GIB:.2f} GiB reserved, {line['peak_allocated_bytes'] / GIB:.2f} GiB allocated, "
            f"median step {line['step_ms_median']:.1f} ms, {line['wall_s']:.1f} s")


def read_lines(paths):
    rows = []
    for path in paths:
        # the committed results are gzipped (bench/torch-live/results/*.jsonl.gz)
        opener = gzip.open if str(path).endswith(".gz") else open
        with opener(path, "rt") as f:
            try:
                numbered = list(enumerate(f, 1))
            except (OSError, EOFError, UnicodeDecodeError) as e:  # gzip.BadGzipFile is an OSError
                raise ValueError(f"{path}: not readable as {'gzipped ' if opener is gzip.open else ''}JSON lines ({e})") from e
            for number, line in numbered:
                if line.strip():
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as e:
                        raise ValueError(f"{path}:{number}: not a JSON line ({e})") from e
                    missing = [k for k in REQUIRED_KEYS if not isinstance(row, dict) or k not in row]
                    if missing:
                        raise ValueError(f"{path}:{number}: not a run.sh result (no {', '.join(missing)})")
                    rows.append(row)
    return rows


def deviation(a, b):
    """|a - b| relative to the larger magnitude (0 when equal; inf when either is not finite)."""
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


def values_match(values, reference, rtol):
    """(whether every value is within rtol of the reference's, the largest deviation). A different
    number of values never matches."""
    if len(values) != len(reference):
        return False, math.inf
    worst = max((deviation(a, b) for a, b in zip(values, reference)), default=0.0)
    return worst <= rtol, worst


def _group_key(row):
    return (row["program"], row["steps"], row["warmup"])


def summarise(rows, rtol=DEFAULT_RTOL):
    """Groups the lines by (program, steps, warmup), in the order they first appear; within a group
    one entry per configuration (run.py's order, then any other). Returns a list of
    {program, steps, warmup, configs: {name: {...}}}."""
    groups = {}
    for row in rows:
        groups.setdefault(_group_key(row), []).append(row)
    order = list(CONFIGS)
    out = []
    for (program, steps, warmup), members in groups.items():
        ok_default = sorted((r for r in members if r["config"] == "torch-default" and r["ok"]), key=lambda r: r["repeat"])
        reference = ok_default[0]["values"] if ok_default else None
        names = sorted({r["config"] for r in members}, key=lambda c: (order.index(c) if c in order else len(order), c))
        configs = {}
        for name in names:
            runs = [r for r in members if r["config"] == name]
            ok = [r for r in runs if r["ok"]]
            entry = {"runs": len(runs), "ok": len(ok)}
            if ok:
                entry["peak_reserved_bytes"] = statistics.median(r["peak_reserved_bytes"] for r in ok)
                entry["peak_allocated_bytes"] = statistics.median(r["peak_allocated_bytes"] for r in ok)
                ratios = [r["peak_reserved_bytes"] / r["peak_allocated_bytes"] for r in ok if r["peak_allocated_bytes"]]
                if ratios:
                    entry["reserved_per_allocated"] = statistics.median(ratios)
                entry["step_ms_median"] = statistics.median(r["step_ms_median"] for r in ok)
                entry["step_ms_run_medians"] = [r["step_ms_median"] for r in ok]
                entry["step_ms_min"] = min(r["step_ms_min"] for r in ok)
                entry["step_ms_max"] = max(r["step_ms_max"] for r in ok)
                if reference is not None:
                    checks = [values_match(r["values"], reference, rtol) for r in ok]
                    entry["values_match"] = all(c[0] for c in checks)
                    entry["max_deviation"] = max(c[1] for c in checks)
            configs[name] = entry
        out.append({"program": program, "steps": steps, "warmup": warmup, "configs": configs})
    return out


def _unsettled(entry):
    """The range of a configuration's runs' medians when they differ by more than RUN_SPREAD, else None."""
    medians = entry.get("step_ms_run_medians") or [entry["step_ms_median"]]
    lo, hi = min(medians), max(medians)
    return (lo, hi) if lo > 0 and hi / lo > 1 + RUN_SPREAD else None


def verdict(group):
    """("yes" | "no" | "undecided", the sentence) for one group of summarise()."""
    configs = group["configs"]
    default, expandable = configs.get("torch-default", {}), configs.get("torch-expandable", {})
    if not default.get("ok") or not expandable.get("ok"):
        return "undecided", "needs a successful torch-default and torch-expandable run"
    reserved_limit = expandable["peak_reserved_bytes"]
    step_limit = default["step_ms_median"] * (1 + STEP_SLACK)
    limits = (f"torch-expandable reserves {reserved_limit / GIB:.2f} GiB; torch-default's step "
              f"{default['step_ms_median']:.1f} ms, +{STEP_SLACK:.0%}: {step_limit:.1f} ms")
    noisy_default = _unsettled(default)
    winners, losers, unsettled = [], [], []
    for name, c in configs.items():
        if not name.startswith("gpumem-"):
            continue
        reasons = []
        if c["ok"] < c["runs"] or not c["ok"]:
            reasons.append(f"{c['runs'] - c['ok']} of {c['runs']} runs failed")
        if c["ok"]:
            if not c.get("values_match", False):
                reasons.append("losses differ")
            if c["peak_reserved_bytes"] > reserved_limit:
                reasons.append(f"{c['peak_reserved_bytes'] / GIB:.2f} GiB")
            noisy = noisy_default or _unsettled(c)
            if not noisy and c["step_ms_median"] > step_limit:
                reasons.append(f"{c['step_ms_median']:.1f} ms")
            if not reasons and noisy:
                whose = "torch-default's" if noisy_default else "its"
                unsettled.append(f"{name} ({c['peak_reserved_bytes'] / GIB:.2f} GiB; {whose} runs' medians "
                                 f"{noisy[0]:.1f}-{noisy[1]:.1f} ms)")
                continue
        if reasons:
            losers.append(f"{name}: {', '.join(reasons)}")
        else:
            winners.append(f"{name} ({c['peak_reserved_bytes'] / GIB:.2f} GiB, {c['step_ms_median']:.1f} ms)")
    if winners:
        return "yes", f"{', '.join(winners)} ({limits})"
    if unsettled:
        return "undecided", (f"time not established, the runs differ by more than {RUN_SPREAD:.0%}; within the memory "
                             f"limit: {', '.join(unsettled)}" + (f"; {'; '.join(losers)}" if losers else "") + f" ({limits})")
    if not losers:
        return "undecided", "no gpumem strategy ran"
    return "no", f"{'; '.join(losers)} ({limits})"


def format_table(groups):
    head = ["program", "steps", "config", "runs ok", "peak reserved GiB", "reserved/allocated",
            "median step ms (min-max)", "loss matches (max rel. dev.)"]
    rows = []
    for g in groups:
        for name, c in g["configs"].items():
            if c["ok"]:
                reserved = f"{c['peak_reserved_bytes'] / GIB:.2f}"
                ratio = f"{c['reserved_per_allocated']:.3f}" if "reserved_per_allocated" in c else "-"
                step = f"{c['step_ms_median']:.1f} ({c['step_ms_min']:.1f}-{c['step_ms_max']:.1f})"
                if "values_match" in c:
                    match = f"{'y' if c['values_match'] else 'n'} ({c['max_deviation']:.1e})"
                else:
                    match = "- (no torch-default run)"
            else:
                reserved = ratio = step = match = "-"
            rows.append([g["program"], str(g["steps"]), name, f"{c['ok']}/{c['runs']}", reserved, ratio, step, match])
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in [head] + rows]
    for g in groups:
        answer, why = verdict(g)
        lines.append(f"verdict {g['program']} ({g['steps']} steps): {answer}: {why}")
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("table", help="the table and the verdicts of results.jsonl files")
    t.add_argument("files", nargs="+")
    t.add_argument("--rtol", type=float, default=DEFAULT_RTOL, help=f"loss tolerance, relative (default {DEFAULT_RTOL})")
    r = sub.add_parser("record", help="print the JSON line of one process from its log")
    r.add_argument("--log", required=True)
    r.add_argument("--exit", type=int, required=True)
    r.add_argument("--wall", type=float, required=True)
    r.add_argument("--program", required=True)
    r.add_argument("--config", required=True)
    r.add_argument("--repeat", type=int, required=True)
    r.add_argument("--steps", type=int, required=True)
    r.add_argument("--warmup", type=int, required=True)
    r.add_argument("--commit")
    args = p.parse_args(argv)
    if args.command == "record":
        text = ""
        if os.path.exists(args.log):
            with open(args.log, errors="replace") as f:
                text = f.read()
        line = result_line(text, args.exit, round(args.wall, 1), args.program, args.config, args.repeat,
                           args.steps, args.warmup, args.commit)
        print(json.dumps(line))
        print(f"   {describe(line)}", file=sys.stderr)
        return 0 if line["ok"] else 1
    if not (args.rtol >= 0):
        p.error(f"--rtol must be a number >= 0 (got {args.rtol})")
    missing = [f for f in args.files if not os.path.exists(f)]
    if missing:
        p.error(f"no such file: {', '.join(missing)}")
    try:
        rows = read_lines(args.files)
    except ValueError as e:
        p.error(str(e))
    if not rows:
        p.error(f"no results in {', '.join(args.files)}")
    print("\n".join(format_table(summarise(rows, args.rtol))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
