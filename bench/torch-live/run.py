#!/usr/bin/env python3
"""Runs one of bench/traces/record.py's programs live, in this process, under one allocator
configuration, and prints one line `RESULT {json}`: peak reserved and allocated bytes, each step's
time (cuda-synchronised) and each step's loss. bench/torch-live/run.sh runs the grid, one process
per (program, configuration, repeat).

  python3 bench/torch-live/run.py --program resnet50 --config gpumem-pool
  python3 bench/torch-live/run.py --program seed_gcn --config torch-expandable --steps 4 --warmup 1
  python3 bench/torch-live/run.py --program gpt2_finetune --config gpumem-async --dry-run
  python3 bench/torch-live/run.py --configs            # the configurations and the environment of each
  python3 bench/torch-live/run.py --library            # the libgpumem_torch.so the gpumem runs load
  python3 bench/torch-live/run.py --estimate           # the grid's time, from bench/traces/manifest.json

Configurations (each sets its variables and removes the others below before PyTorch is imported):
  torch-default       PyTorch's caching allocator
  torch-expandable    PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  gpumem-pool         GPUMEM_ALLOCATOR=pool, then gpumem_torch.enable()
  gpumem-async        GPUMEM_ALLOCATOR=async, then gpumem_torch.enable()
  gpumem-expandable   GPUMEM_ALLOCATOR=expandable, then gpumem_torch.enable()

Peaks: torch.cuda.max_memory_reserved() / max_memory_allocated() under PyTorch's allocator;
gpumem_torch.memory_stats()'s reserved_bytes.all.peak / allocated_bytes.all.peak under gpumem's
(PyTorch's counters do not see a pluggable allocator). Both cover the whole program, model and
data included.

A step is one optimiser step (gpt2_finetune, resnet50, graphsage's mini-batches, seed_gcn's
full-batch epochs) or, for gpt2_generate, one forward: each prompt's, then each new token's
(--steps new tokens per prompt, three prompts). Step k's time is from the end of step k-1 to the end
of step k, both after torch.cuda.synchronize(): everything the program does per step, its data
included. The first --warmup steps are left out of the median and spread. Each step's value is its
loss (gpt2_generate: the largest logit of the forward's last position); run.sh's summary compares
them with PyTorch's default run's.
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "bench", "traces"))

import record  # noqa: E402  (the programs; only the standard library at import)

LIBRARY_NAME = "libgpumem_torch.so"
MANIFEST = os.path.join(REPO, "bench", "traces", "manifest.json")

# The steps of a run when --steps is not given (gpt2_generate: new tokens per prompt, so 3 x 7
# forwards). From manifest.json (--estimate), start-up and exit, not steps, are most of a process's
# time; 6 is the fewest that leaves 4 measured steps after a warm-up of 2.
DEFAULT_STEPS = 6
DEFAULT_WARMUP = 2
GENERATE_PROMPTS = 3  # record.run_gpt2_generate's prompts: 32, 200 and 600 tokens

# name -> (allocator, variables set). Every variable of CLEARED that a configuration does not set
# is removed, so that a caller's environment cannot change what a configuration means.
CONFIGS = {
    "torch-default": ("torch", {}),
    "torch-expandable": ("torch", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    "gpumem-pool": ("gpumem", {"GPUMEM_ALLOCATOR": "pool"}),
    "gpumem-async": ("gpumem", {"GPUMEM_ALLOCATOR": "async"}),
    "gpumem-expandable": ("gpumem", {"GPUMEM_ALLOCATOR": "expandable"}),
}
TORCH_CONF_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING")
KEPT_GPUMEM_VARS = ("GPUMEM_TORCH_LIB", "GPUMEM_COMMIT")


def cleared(name):
    """Whether configurations remove the variable `name` unless they set it: PyTorch's allocator
    settings and every GPUMEM_* variable but the library's path (GPUMEM_TRACE included: nothing is
    recorded here)."""
    return name in TORCH_CONF_VARS or (name.startswith("GPUMEM_") and name not in KEPT_GPUMEM_VARS)


def config_environment(config, environ):
    """The environment of a `config` process: `environ` less the cleared variables, plus the
    configuration's. Raises KeyError for an unknown configuration."""
    _, variables = CONFIGS[config]
    env = {k: v for k, v in environ.items() if not cleared(k)}
    env.update(variables)
    return env


def installed_wheel_library():
    """libgpumem_torch.so inside an installed gpumem-torch wheel (the first distribution that has
    it), or None."""
    from importlib import metadata

    for dist in metadata.distributions(name="gpumem-torch"):
        path = os.path.abspath(str(dist.locate_file(f"gpumem_torch/lib/{LIBRARY_NAME}")))
        if os.path.exists(path):
            return path
    return None


def find_library(environ, installed=installed_wheel_library):
    """(path, where it comes from) of the libgpumem_torch.so the gpumem runs load:
    $GPUMEM_TORCH_LIB, else the installed gpumem-torch wheel's, else the repository's
    native/build/Release/libgpumem_torch.so (which may not exist: the caller checks)."""
    if environ.get("GPUMEM_TORCH_LIB"):
        return os.path.abspath(os.path.expanduser(environ["GPUMEM_TORCH_LIB"])), "$GPUMEM_TORCH_LIB"
    wheel = installed()
    if wheel:
        return wheel, "the installed gpumem-torch wheel"
    return os.path.join(REPO, "native", "build", "Release", LIBRARY_NAME), "the repository's native build"


def step_events(program, steps):
    """How many times a run of `program` with `steps` calls the per-step hook."""
    if program == "gpt2_generate":
        return GENERATE_PROMPTS * (steps + 1)  # each prompt's forward, then one per new token
    return steps


def step_times_ms(ends, warmup):
    """Step k's time (ms) is ends[k] - ends[k-1] (seconds, perf_counter after a synchronise);
    returns (every step's from the second, the measured ones: steps warmup.. )."""
    every = [round((b - a) * 1000, 3) for a, b in zip(ends, ends[1:])]
    return every, every[warmup - 1 :]


def estimate_seconds(manifest, programs, configs, repeats, steps):
    """The grid's time from record.py's runs in `manifest` (manifest.json). A recorded process took
    wall_seconds: start-up and exit (wall_seconds - seconds) and the program (seconds: set-up, then
    `S` steps). How seconds splits into set-up and steps is not recorded, so a process of `steps`
    steps takes between start-up + seconds x min(1, steps/S) (no set-up) and start-up + seconds x
    max(1, steps/S) (all set-up), the smaller over the two recorded modes (recording only adds).
    Returns {program: (low, high) seconds of one process} and the (low, high) total for
    configs x repeats."""
    per_process = {}
    for program in programs:
        runs = [t for t in manifest["traces"] if t["workload"] == program and "result" in t]
        if not runs:
            raise ValueError(f"{program}: no successful run in the manifest")
        bounds = []
        for t in runs:
            startup, seconds, ratio = t["wall_seconds"] - t["result"]["seconds"], t["result"]["seconds"], steps / t["steps"]
            bounds.append((startup + seconds * min(1.0, ratio), startup + seconds * max(1.0, ratio)))
        per_process[program] = (min(b[0] for b in bounds), min(b[1] for b in bounds))
    processes = len(configs) * repeats
    total = (sum(b[0] for b in per_process.values()) * processes, sum(b[1] for b in per_process.values()) * processes)
    return per_process, total


def loaded_versions():
    """Python's and PyTorch's versions, and those of the libraries the program imported (record.py's
    versions() imports them all: seconds a process that only cost start-up)."""
    import platform

    out = {"python": platform.python_version()}
    for name in ("torch", "transformers", "torchvision", "torch_geometric"):
        module = sys.modules.get(name)
        if module is not None:
            out[name] = getattr(module, "__version__", "unknown")
    return out


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--program", help=f"one of {', '.join(record.WORKLOADS)}")
    p.add_argument("--config", help=f"one of {', '.join(CONFIGS)}")
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS, help=f"steps (gpt2_generate: new tokens per prompt; default {DEFAULT_STEPS})")
    p.add_argument("--warmup", type=int, default=DEFAULT_WARMUP, help=f"steps left out of the statistics (default {DEFAULT_WARMUP}, at least 1)")
    p.add_argument("--repeat", type=int, default=1, help="the repeat's number, written into the result")
    p.add_argument("--dry-run", action="store_true", help="check the arguments, print the plan (the environment set) as JSON, run nothing")
    p.add_argument("--configs", action="store_true", help="print the configurations and their variables as JSON")
    p.add_argument("--library", action="store_true", help="print the path of the libgpumem_torch.so the gpumem runs load")
    p.add_argument("--estimate", action="store_true", help="print the time of the grid (--programs, --config-list, --repeats) from manifest.json")
    p.add_argument("--programs", default=",".join(record.WORKLOADS), help="--estimate: comma-separated programs")
    p.add_argument("--config-list", default=",".join(CONFIGS), help="--estimate: comma-separated configurations")
    p.add_argument("--repeats", type=int, default=3, help="--estimate: processes per program and configuration")
    args = p.parse_args(argv)
    if args.configs or args.library:
        return p, args
    if args.estimate:
        args.program_list = split_names(p, args.programs, record.WORKLOADS, "program")
        args.config_names = split_names(p, args.config_list, CONFIGS, "configuration")
        if args.repeats < 1:
            p.error(f"--repeats must be at least 1 (got {args.repeats})")
        if args.steps < 1:
            p.error(f"--steps must be at least 1 (got {args.steps})")
        return p, args
    if args.program not in record.WORKLOADS:
        p.error(f"--program must be one of {', '.join(record.WORKLOADS)} (got {args.program!r})")
    if args.config not in CONFIGS:
        p.error(f"--config must be one of {', '.join(CONFIGS)} (got {args.config!r})")
    if args.steps < 1:
        p.error(f"--steps must be at least 1 (got {args.steps})")
    if args.repeat < 1:
        p.error(f"--repeat must be at least 1 (got {args.repeat})")
    if args.warmup < 1:
        p.error(f"--warmup must be at least 1: the first step's time is not measured (got {args.warmup})")
    events = step_events(args.program, args.steps)
    if events <= args.warmup:
        p.error(f"--warmup {args.warmup} leaves no measured step: {args.program} with --steps {args.steps} has {events} steps")
    return p, args


def split_names(p, text, known, what):
    names = [s for s in text.replace(",", " ").split() if s]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        p.error(f"unknown {what}(s) {unknown or text!r}; known: {', '.join(known)}")
    return names


def plan(args, environ):
    """What a run does, without doing it: the program, steps and the environment it sets."""
    allocator, variables = CONFIGS[args.config]
    env = config_environment(args.config, environ)
    out = {
        "program": args.program,
        "config": args.config,
        "allocator": allocator,
        "steps": args.steps,
        "warmup": args.warmup,
        "step_events": step_events(args.program, args.steps),
        "sets": variables,
        "removes": sorted(k for k in environ if k not in env),
    }
    if allocator == "gpumem":
        out["library"], out["library_from"] = find_library(environ)
    return out


def worker(args):
    """Runs the program in this process. The environment is set before PyTorch is imported."""
    allocator, _ = CONFIGS[args.config]
    env = config_environment(args.config, os.environ)
    for key in [k for k in os.environ if k not in env]:
        del os.environ[key]
    os.environ.update(env)
    result = {"program": args.program, "config": args.config, "repeat": args.repeat, "allocator": allocator,
              "steps": args.steps, "warmup": args.warmup, "env": CONFIGS[args.config][1]}
    if allocator == "gpumem":
        os.environ["GPUMEM_TORCH_LIB"] = find_library(os.environ)[0]
        import gpumem_torch

        result["library"] = gpumem_torch.library_path()
        result["allocator_config"] = gpumem_torch.enable()  # GPUMEM_ALLOCATOR from the environment
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("error: PyTorch sees no CUDA device")
    if allocator == "torch":
        result["allocator_config"] = f"{torch.cuda.get_allocator_backend()} {os.environ.get('PYTORCH_CUDA_ALLOC_CONF', '')}".strip()
    torch.manual_seed(0)  # as record.py's worker
    dev = torch.device("cuda")
    ends, values = [], []

    def on_step(value):
        torch.cuda.synchronize()
        values.append(float(value))
        ends.append(time.perf_counter())

    info = {}
    start = time.perf_counter()
    record.RUNNERS[args.program](torch, dev, args.steps, info, on_step=on_step)
    result["seconds"] = round(time.perf_counter() - start, 3)
    if len(ends) <= args.warmup:
        raise SystemExit(f"error: {args.program} ran {len(ends)} steps, not more than --warmup {args.warmup}")
    if allocator == "torch":
        stats = torch.cuda.memory_stats()
        result["stats_from"] = "torch.cuda.memory_stats"
        result["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        result["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        result["peak_requested_bytes"] = stats.get("requested_bytes.all.peak")
    else:
        import gpumem_torch

        stats = gpumem_torch.memory_stats()
        result["stats_from"] = "gpumem_torch.memory_stats"
        result["peak_reserved_bytes"] = stats["reserved_bytes.all.peak"]
        result["peak_allocated_bytes"] = stats["allocated_bytes.all.peak"]
        result["peak_requested_bytes"] = stats["allocated_bytes.all.peak"]  # gpumem counts the sizes asked for
    result["device_allocs"] = stats.get("num_device_alloc")
    result["device_frees"] = stats.get("num_device_free")
    every, measured = step_times_ms(ends, args.warmup)
    result.update({
        "step_events": len(ends),
        "step_ms": every,
        "step_ms_median": statistics.median(measured),
        "step_ms_min": min(measured),
        "step_ms_max": max(measured),
        "value_kind": "max_logit" if args.program == "gpt2_generate" else "loss",
        "values": values,
        "info": info,
        "gpu": torch.cuda.get_device_name(0),
        "versions": loaded_versions(),
    })
    print("RESULT " + json.dumps(result), flush=True)
    return 0


def main(argv=None):
    p, args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.configs:
        print(json.dumps({name: {"allocator": a, "sets": v} for name, (a, v) in CONFIGS.items()}, indent=1))
        return 0
    if args.library:
        print(find_library(os.environ)[0])
        return 0
    if args.estimate:
        with open(MANIFEST) as f:
            manifest = json.load(f)
        per_process, (low, high) = estimate_seconds(manifest, args.program_list, args.config_names, args.repeats, args.steps)
        for prog, (a, b) in per_process.items():
            print(f"{prog:14} {a:5.1f}-{b:5.1f} s a process")
        processes = len(args.program_list) * len(args.config_names) * args.repeats
        print(f"{processes} processes of {args.steps} steps: {low / 60:.1f}-{high / 60:.1f} min "
              f"(from {os.path.relpath(MANIFEST, REPO)}: {manifest.get('gpu')})")
        return 0
    if args.dry_run:
        print(json.dumps(plan(args, os.environ), indent=1))
        return 0
    return worker(args)


if __name__ == "__main__":
    sys.exit(main())
