#!/usr/bin/env python3
"""Does `gpumem doctor` agree with real runs? For each program of bench/traces/record.py:

  1. record its PyTorch memory snapshot under PyTorch's caching allocator (record.py --modes torch),
  2. ask `gpumem doctor` for the live bytes' floor, PyTorch's default allocator's need (pool with
     its free-and-retry, as the doctor models it) and the least-needing gpumem strategy's,
  3. pick capacities from those figures: above PyTorch's need (`fits`), between the strategy's
     need and PyTorch's (`fragmentation`, where the gap is wide enough), under the live bytes
     (`real`), and take the doctor's verdict at each,
  4. run the program for real at each capacity, in fresh processes, the same steps and seeds:
     - under PyTorch's caching allocator with torch.cuda.set_per_process_memory_fraction(capacity /
       total), which caps what it reserves;
     - under the strategy the doctor names (gpumem_torch.enable()), with the device's free memory
       brought down to the capacity by a ballast allocated outside any allocator (cuMemAlloc): a
       pluggable allocator does not see PyTorch's memory fraction;
     each ends in "completed" or "out of memory",
  5. and compares: the doctor agrees in a case when PyTorch's run fits exactly where it said
     PyTorch's default fits, and the strategy's run fits exactly where it said that strategy fits.

Prints a markdown table and writes JSON.

  python3 bench/doctor/agree.py --programs gpt2_finetune,gpt2_generate --out bench/doctor/out
  python3 bench/doctor/agree.py --programs gpt2_finetune --steps 12 --cases fragmentation,real
  # the doctor's part without a GPU, from the corpus's snapshots; then the real runs on a GPU host
  python3 bench/doctor/agree.py --snapshots bench/traces --programs gpt2_finetune,seed_gcn --plan plan.json
  python3 bench/doctor/agree.py --run-plan plan.json --gpus 0,1,2,3

Needs PyTorch with CUDA, the programs' packages (transformers, ...), libgpumem_torch.so (as
bench/torch-live finds it) and the CLI built (packages/cli/dist/cli.js).
"""

import argparse
import ctypes
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "bench", "traces"))
sys.path.insert(0, os.path.join(REPO, "bench", "torch-live"))
sys.path.insert(0, os.path.join(REPO, "bindings", "python"))

import record  # noqa: E402  (the programs; only the standard library at import)

CLI = os.path.join(REPO, "packages", "cli", "dist", "cli.js")
CASES = ("fits", "fragmentation", "real")
MiB = 2**20
GiB = 2**30


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--programs", default="gpt2_finetune,gpt2_generate", help=f"comma-separated, of {', '.join(record.WORKLOADS)}")
    p.add_argument("--steps", type=int, help="steps of every program (gpt2_generate: new tokens per prompt; default: record.py's for each)")
    p.add_argument("--cases", default=",".join(CASES), help="capacities to try per program: fits, fragmentation, real (default all)")
    p.add_argument("--min-gap", type=float, default=0.04,
                   help="a fragmentation case needs PyTorch's need at least this fraction above the strategy's (default 0.04)")
    p.add_argument("--out", default=os.path.join(HERE, "out"), help="folder for the snapshots and doctor's JSON")
    p.add_argument("--json", help="the result (default OUT/agree.json)")
    p.add_argument("--timeout", type=int, default=300, help="seconds a process may take (default 300)")
    p.add_argument("--snapshots", help="read PROGRAM.torch.pickle.gz from this folder (e.g. bench/traces: the corpus) instead of recording")
    p.add_argument("--base-capacity", default="80GiB",
                   help="the capacity of the first doctor call, whose minimum capacities choose the cases (default 80GiB)")
    p.add_argument("--plan", help="write the cases and the doctor's verdicts to this file and run nothing (no GPU needed "
                                  "with --snapshots)")
    p.add_argument("--run-plan", help="run the cases of a --plan file for real (on the GPU), then compare")
    p.add_argument("--gpus", default="0", help="--run-plan: CUDA devices to run cases on at once, comma-separated (default 0)")
    p.add_argument("--near", help="capacities around the needs instead of --cases: comma-separated factors (e.g. "
                   "0.98,0.995,1.005,1.02); each program gets PyTorch's need times each factor, run under PyTorch's "
                   "allocator only (its memory fraction caps the allocator alone)")
    p.add_argument("--near-offsets", help="with --near: the named strategy's need plus each of these MiB (comma-separated, "
                   "e.g. 0,100,200,300), run under that strategy only: where it really runs out, against the memory "
                   "outside the allocator the doctor's band assumes")
    p.add_argument("--rejudge", help="an agree JSON of real runs (--run-plan's): ask the doctor again at each capacity, "
                   "with its band as it stands, and count the agreements outside the band (no GPU needed)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--allocator", help=argparse.SUPPRESS)
    p.add_argument("--capacity", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.program_list = [s for s in args.programs.split(",") if s]
    unknown = [s for s in args.program_list if s not in record.WORKLOADS]
    if unknown or not args.program_list:
        p.error(f"unknown program(s) {unknown or args.programs!r}; known: {', '.join(record.WORKLOADS)}")
    args.case_list = [s for s in args.cases.split(",") if s]
    if not args.case_list or any(c not in CASES for c in args.case_list):
        p.error(f"--cases takes {', '.join(CASES)}, comma-separated; received {args.cases!r}")
    if args.steps is not None and args.steps < 1:
        p.error("--steps must be at least 1")
    args.near_factors = comma_separated(p, "--near", args.near, float, "factors such as 0.99,1.01")
    if args.near and (not args.near_factors or any(not 0.5 <= f <= 2 for f in args.near_factors)):
        p.error(f"--near takes factors from 0.5 to 2; received {args.near!r}")
    args.near_offsets_mib = comma_separated(p, "--near-offsets", args.near_offsets, int, "whole MiB such as 0,100,200")
    return args


def comma_separated(p, flag, text, kind, what):
    """The values of `flag`'s comma-separated `text`, each made by `kind` ([] where the flag is not
    given); p.error (exit 2) where one is not a `kind`."""
    try:
        return [kind(v) for v in (text or "").split(",") if v]
    except ValueError:
        p.error(f"{flag} takes comma-separated {what}; received {text!r}")


# ---------------------------------------------------------------------------------------------
# The worker: one program at one capacity under one allocator, in a process of its own


def ballast(torch, capacity):
    """Leaves `capacity` bytes of the device free, taking the rest with cuMemAlloc (outside every
    allocator). Returns the bytes taken."""
    cuda = ctypes.CDLL("libcuda.so.1")
    free, _ = torch.cuda.mem_get_info()
    take = free - capacity
    if take <= 0:
        return 0
    ptr = ctypes.c_uint64()
    rc = cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(take))
    if rc != 0:
        raise SystemExit(f"error: cuMemAlloc of the ballast ({take} bytes) failed with {rc}")
    return take


def worker(args):
    result = {"program": args.worker, "allocator": args.allocator, "capacity": args.capacity, "steps": args.steps}
    for key in [k for k in os.environ if k.startswith("GPUMEM_") and k != "GPUMEM_TORCH_LIB"]:
        del os.environ[key]
    for key in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING"):
        os.environ.pop(key, None)
    gpumem = args.allocator != "torch"
    if not gpumem and args.worker in record.ALLOC_CONF:  # the settings the program was recorded under
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = record.ALLOC_CONF[args.worker]
        result["alloc_conf"] = record.ALLOC_CONF[args.worker]
    if gpumem:
        import run as torch_live  # bench/torch-live/run.py: where the library is found

        os.environ["GPUMEM_TORCH_LIB"] = torch_live.find_library(os.environ)[0]
        import gpumem_torch

        result["allocator_config"] = gpumem_torch.enable(args.allocator)
    import torch

    torch.manual_seed(0)  # as record.py's worker
    dev = torch.device("cuda")
    total = torch.cuda.get_device_properties(0).total_memory
    if gpumem:
        # the cuBLAS handle's own memory comes outside the allocator: made before the ballast is measured
        a = torch.ones(64, 64, device=dev)
        (a @ a).sum().item()
        del a
        result["ballast_bytes"] = ballast(torch, args.capacity)
    else:
        torch.cuda.set_per_process_memory_fraction(args.capacity / total)
        result["fraction"] = args.capacity / total
    info = {}
    try:
        record.RUNNERS[args.worker](torch, dev, args.steps, info)
        result["outcome"] = "completed"
    except Exception as e:  # noqa: BLE001  (PyTorch's OutOfMemoryError, or gpumem's RuntimeError under enable())
        if "out of memory" not in str(e).lower():
            raise
        result["outcome"] = "out of memory"
        result["message"] = str(e)[:2000]
    if gpumem:
        import gpumem_torch

        result["peak_reserved_bytes"] = gpumem_torch.memory_stats()["reserved_bytes.all.peak"]
    else:
        result["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
    result["gpu"] = torch.cuda.get_device_name(0)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


# ---------------------------------------------------------------------------------------------
# The driver


def run_json(cmd, timeout, extra_env=None):
    """Runs cmd; the last `RESULT {json}` line of its output, or {"error": ...}."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(extra_env or {}))
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"outcome": "timeout"}
    lines = [line[7:] for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        return {"outcome": "error", "error": (proc.stderr or proc.stdout)[-1500:]}
    return json.loads(lines[-1])


def doctor(snapshot, capacity, out_json, timeout, extra=()):
    cmd = ["node", CLI, "doctor", snapshot, "--json", out_json]
    cmd += ["--capacity", str(capacity), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"error: gpumem doctor failed ({proc.returncode}): {proc.stderr[-1500:]}")
    with open(out_json) as f:
        return json.load(f)["verdict"]


def verdict_of(doc):
    """(kind, live, PyTorch's need and fits, the best strategy's label, need and fits) from doctor's JSON."""
    best = doc.get("best") or {}
    by_label = {s["label"]: s for s in doc["strategies"]}
    strategy = by_label.get(best.get("label"), {})
    return {
        "kind": doc["kind"],
        "capacity": doc["capacityBytes"],
        "live": doc["liveBytes"],
        "pytorch_need": doc["pytorch"].get("needBytes"),
        "pytorch_fits": doc["pytorch"].get("fits"),
        "best": best.get("label"),
        "best_need": best.get("needBytes"),
        "best_fits": strategy.get("fits", best.get("fits")),
        # the calls with the band (fits / too-close / does-not-fit) and the bands themselves
        "pytorch_call": doc["pytorch"].get("call"),
        "pytorch_band": doc["pytorch"].get("band"),
        "best_call": strategy.get("call"),
        "best_band": strategy.get("band"),
    }


def strategy_name(label):
    """The GPUMEM_ALLOCATOR name of a doctor's label (a spec such as 'expandable' or 'pool:...', or a
    strategy that reproduces another allocator: 'caching (PyTorch's allocator)')."""
    return label.split(":")[0].split(" (")[0]


# Under set_per_process_memory_fraction the cap is on PyTorch's allocator alone: memory outside it
# does not count against the capacity, so PyTorch's runs are judged with none.
TORCH_RUN_DOCTOR_FLAGS = ("--outside", "0")


def rejudge(rows, args):
    """--rejudge: the doctor's calls (with its band, as it stands now) at each measured row's
    capacity, and whether the real run agrees wherever the call is not too close."""
    for r in rows:
        torch_run = "torch" in r.get("runs", ["torch", "strategy"])
        extra = TORCH_RUN_DOCTOR_FLAGS if torch_run else ()
        doc = doctor(os.path.join(REPO, r["snapshot"]), r["capacity"], os.path.join(args.out, "rejudge.json"), args.timeout, extra)
        v = verdict_of(doc)
        call, real = (v["pytorch_call"], r["torch"]) if torch_run else (v["best_call"], r["gpumem"])
        band = v["pytorch_band"] if torch_run else v["best_band"]
        outcome = real.get("outcome")
        r["band_call"] = call
        r["band"] = band
        if outcome not in ("completed", "out of memory"):
            r["agrees_outside_band"] = None
        elif call == "too-close":
            r["agrees_outside_band"] = "inside"
        else:
            r["agrees_outside_band"] = (call == "fits") == (outcome == "completed")
        print(f"   {r['program']} {r['case']}: {gib(r['capacity'])}: band {gib(band and band['lowBytes'])} to "
              f"{gib(band and band['highBytes'])}: {call}; real {outcome}: {r['agrees_outside_band']}", flush=True)
    judged = [r for r in rows if r["agrees_outside_band"] in (True, False)]
    agreed = sum(1 for r in judged if r["agrees_outside_band"] is True)
    inside = sum(1 for r in rows if r["agrees_outside_band"] == "inside")
    widths = [(r["band"]["highBytes"] - r["band"]["lowBytes"]) / r["capacity"] for r in rows if r.get("band")]
    summary = {"outside_band": len(judged), "agreed": agreed, "inside_band": inside,
               "not_measured": sum(1 for r in rows if r["agrees_outside_band"] is None),
               "widest_band_fraction": max(widths) if widths else None}
    print(f"outside the band: {agreed} of {len(judged)} agree; {inside} inside the band; {summary['not_measured']} not measured")
    out = args.json or os.path.join(args.out, "rejudged.json")
    with open(out, "w") as f:
        json.dump({"args": {k: v for k, v in vars(args).items() if k != "worker"}, "rows": rows, "summary": summary}, f, indent=1)
    print(f"wrote {out}")
    return 0 if agreed == len(judged) else 1


def capacities(base, cases, min_gap):
    """The capacities to try, by case, from the doctor's figures at the device's own capacity."""
    out = {}
    live, torch_need, best_need = base["live"], base["pytorch_need"], base["best_need"]
    if "fits" in cases and torch_need:
        out["fits"] = int(torch_need * 1.05)
    if "fragmentation" in cases and torch_need and best_need and torch_need > best_need * (1 + min_gap):
        out["fragmentation"] = int((torch_need + best_need) / 2)
    if "real" in cases and live:
        out["real"] = int(live * 0.9)
    return out


def gib(n):
    return "-" if n is None else f"{n / GiB:.2f} GiB"


def make_plan(args):
    """The cases: per program, the snapshot (recorded, or from --snapshots), the doctor's figures,
    the capacities chosen from them and the doctor's verdict at each."""
    os.makedirs(args.out, exist_ok=True)
    rows, skipped = [], []
    for program in args.program_list:
        start = time.perf_counter()
        steps = args.steps or record.WORKLOADS[program]
        if args.snapshots:
            snapshot = os.path.join(args.snapshots, f"{program}.torch.pickle.gz")
            if not os.path.exists(snapshot):
                skipped.append({"program": program, "reason": f"no snapshot {snapshot}"})
                continue
        else:
            rec = subprocess.run([sys.executable, os.path.join(REPO, "bench", "traces", "record.py"), "--only", program,
                                  "--steps", str(steps), "--modes", "torch", "--out", args.out],
                                 capture_output=True, text=True, timeout=args.timeout)
            snapshot = os.path.join(args.out, f"{program}.torch.pickle.gz")
            if rec.returncode != 0 or not os.path.exists(snapshot):
                skipped.append({"program": program, "reason": f"recording failed: {(rec.stderr or rec.stdout)[-800:]}"})
                continue
        base = verdict_of(doctor(snapshot, args.base_capacity, os.path.join(args.out, f"{program}-doctor.json"), args.timeout))
        print(f"== {program}: live {gib(base['live'])}, PyTorch's default needs {gib(base['pytorch_need'])}, "
              f"{base['best']} {gib(base['best_need'])} ({time.perf_counter() - start:.0f} s)", flush=True)
        if args.near_factors:
            rows += near_rows(program, steps, snapshot, base, args)
            continue
        caps = capacities(base, args.case_list, args.min_gap)
        for case in args.case_list:
            if case not in caps:
                skipped.append({"program": program, "case": case,
                                "reason": "PyTorch's need is within --min-gap of the strategy's" if case == "fragmentation" else "no figure"})
        for case, capacity in caps.items():
            v = verdict_of(doctor(snapshot, capacity, os.path.join(args.out, f"{program}-doctor-{case}.json"), args.timeout))
            rows.append({"program": program, "steps": steps, "snapshot": os.path.relpath(snapshot, REPO), "case": case,
                         "capacity": capacity, "doctor": v, "strategy": strategy_name(v["best"]) if v["best"] else None})
            print(f"   {case}: {gib(capacity)}: doctor {v['kind']} (PyTorch {'fits' if v['pytorch_fits'] else 'OOM'}, "
                  f"{v['best']} {'fits' if v['best_fits'] else 'OOM'})", flush=True)
    return rows, skipped


def near_rows(program, steps, snapshot, base, args):
    """--near: capacities at PyTorch's need times each factor and the named strategy's need plus each
    offset, each run under the one allocator whose boundary it probes."""
    rows = []
    probes = [("torch", f"near-torch-{f:g}", int(base["pytorch_need"] * f)) for f in args.near_factors if base["pytorch_need"]]
    probes += [("strategy", f"near-strategy+{m}MiB", base["best_need"] + m * MiB) for m in args.near_offsets_mib if base["best_need"]]
    for who, case, capacity in probes:
        extra = TORCH_RUN_DOCTOR_FLAGS if who == "torch" else ()
        v = verdict_of(doctor(snapshot, capacity, os.path.join(args.out, f"{program}-doctor-{case}.json"), args.timeout, extra))
        rows.append({"program": program, "steps": steps, "snapshot": os.path.relpath(snapshot, REPO), "case": case,
                     "capacity": capacity, "doctor": v, "runs": ["torch"] if who == "torch" else ["strategy"],
                     "strategy": strategy_name(base["best"]) if base["best"] else None})
        print(f"   {case}: {gib(capacity)}: doctor {v['kind']} (PyTorch {v['pytorch_call']}, {v['best']} {v['best_call']})",
              flush=True)
    return rows


def run_cases(rows, args):
    """Each case's two real runs (PyTorch's allocator, the strategy named), on --gpus at once."""
    import queue
    from concurrent.futures import ThreadPoolExecutor

    gpus = queue.Queue()
    for g in [s for s in args.gpus.split(",") if s]:
        gpus.put(g)

    def one(row, allocator):
        if allocator is None:
            return {"outcome": "none named"}
        gpu = gpus.get()
        try:
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", row["program"], "--steps", str(row["steps"]),
                   "--capacity", str(row["capacity"]), "--allocator", allocator]
            return run_json(cmd, args.timeout, {"CUDA_VISIBLE_DEVICES": gpu})
        finally:
            gpus.put(gpu)

    def submit(pool, row, who, allocator):
        if who not in row.get("runs", ["torch", "strategy"]):
            return None
        return pool.submit(one, row, allocator)

    with ThreadPoolExecutor(max_workers=gpus.qsize()) as pool:
        futures = [(row, submit(pool, row, "torch", "torch"), submit(pool, row, "strategy", row["strategy"])) for row in rows]
        for row, t, g in futures:
            row["torch"] = t.result() if t else {"outcome": "not run"}
            row["gpumem"] = g.result() if g else {"outcome": "not run"}
            v = row["doctor"]
            ran = [(r, fits) for r, fits in ((row["torch"], v["pytorch_fits"]), (row["gpumem"], v["best_fits"]))
                   if r.get("outcome") != "not run"]
            measured = all(r.get("outcome") in ("completed", "out of memory") for r, _ in ran)
            agrees = measured and all(bool(fits) == (r["outcome"] == "completed") for r, fits in ran)
            row["agrees"] = agrees if measured else None
            print(f"   {row['program']} {row['case']}: {gib(row['capacity'])}: doctor {v['kind']}; PyTorch {row['torch'].get('outcome')}, "
                  f"{row['strategy']} {row['gpumem'].get('outcome')}: {'agrees' if agrees else 'DISAGREES' if measured else 'not measured'}",
                  flush=True)


def report(rows, skipped, args):
    def said(fits):
        return "fits" if fits else "OOM"

    lines = [
        "gpumem doctor against real runs",
        "",
        "| program | steps | capacity | doctor's verdict | live bytes | PyTorch's need (doctor) | PyTorch at the capacity: doctor / real | strategy named | its need (doctor) | it at the capacity: doctor / real | agrees |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        v = r["doctor"]
        lines.append("| " + " | ".join([
            r["program"], str(r["steps"]), gib(r["capacity"]), v["kind"], gib(v["live"]), gib(v["pytorch_need"]),
            f"{said(v['pytorch_fits'])} / {r['torch'].get('outcome')}", r["strategy"] or "-", gib(v["best_need"]),
            f"{said(v['best_fits'])} / {r['gpumem'].get('outcome')}",
            "yes" if r["agrees"] else "no" if r["agrees"] is False else "not measured",
        ]) + " |")
    agreed = sum(1 for r in rows if r["agrees"])
    torch_oom_strategy_fits = sum(1 for r in rows if r["torch"].get("outcome") == "out of memory" and r["gpumem"].get("outcome") == "completed")
    lines += ["", f"agrees in {agreed} of {len(rows)} cases; PyTorch's default out of memory where the named strategy fits: {torch_oom_strategy_fits}"]
    lines += [f"skipped: {s['program']} {s.get('case', '')}: {s['reason']}" for s in skipped]
    print("\n".join(lines))
    out = args.json or os.path.join(args.out, "agree.json")
    with open(out, "w") as f:
        json.dump({"args": {k: v for k, v in vars(args).items() if k != "worker"}, "rows": rows, "skipped": skipped,
                   "agreed": agreed, "cases": len(rows), "pytorch_oom_strategy_fits": torch_oom_strategy_fits}, f, indent=1)
    print(f"wrote {out}")
    return 0 if rows and agreed == len(rows) else 1


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.worker:
        return worker(args)
    if args.rejudge:
        os.makedirs(args.out, exist_ok=True)
        with open(args.rejudge) as f:
            return rejudge(json.load(f)["rows"], args)
    if args.run_plan:
        with open(args.run_plan) as f:
            plan = json.load(f)
        rows, skipped = plan["rows"], plan["skipped"]
    else:
        rows, skipped = make_plan(args)
        if args.plan:
            with open(args.plan, "w") as f:
                json.dump({"rows": rows, "skipped": skipped}, f, indent=1)
            print(f"wrote {args.plan}")
            return 0
    run_cases(rows, args)
    return report(rows, skipped, args)


if __name__ == "__main__":
    sys.exit(main())
