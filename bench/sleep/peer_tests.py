#!/usr/bin/env python3
"""torch_memory_saver's own tests (its test/test_examples.py cases over test/examples/*.py) run against
gpumem's drop-in, gpumem_torch.saver, their files unchanged:

  python3 bench/sleep/peer_tests.py /work/peer/torch_memory_saver/test              # every case, on a GPU
  python3 bench/sleep/peer_tests.py PEER_TEST_DIR --list                           # the plan, no GPU needed
  python3 bench/sleep/peer_tests.py PEER_TEST_DIR --only simple,cuda_graph --timeout 300

PEER_TEST_DIR is the peer's test/ folder at commit 4a43c97 (git archive of that commit; the peer's code
stays out of this repository). The cases are read from its test_examples.py: each test function, its
hook_mode parametrisation, the environment it sets (change_env) and the example function it runs.
bench/sleep/peer_shim/ goes first on PYTHONPATH, so that `import torch_memory_saver` is gpumem's
drop-in (its testing_utils and utils are small CUDA versions of the peer's helpers).

Each case runs as theirs does, in a fresh interpreter (cwd PEER_TEST_DIR, so that `examples` imports),
with a time limit; it passes when the example's run() returns. A case is not applicable, and not run,
where it is for another machine (Intel XPU, ROCm, two devices on a host with one) or where the example,
or a function of its module that it calls, reaches into the peer's internals (`_impl`, `cdll`,
`tms_*` symbols), which gpumem does not have; those are run anyway on a GPU, to say how far they get.
Prints a table and writes OUT/peer_tests.json; exit status 0 when no applicable case failed.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import REPO, commit, markdown_table, utc_now, write_json  # noqa: E402

SHIM = os.path.join(HERE, "peer_shim")
BINDINGS = os.path.join(REPO, "bindings", "python")
HOOK_MODES = ["preload", "torch"]  # the peer's _HOOK_MODES on CUDA
PASSED = "PEER_TEST_PASSED"
# Markers whose cases are for other machines than a CUDA host.
OTHER_MACHINE = {"_xpu_only": "Intel XPU only"}
# What an example uses of the peer's C library, which a drop-in over gpumem cannot offer.
INTERNALS_REASON = "reaches into the peer's internals (its C library or its Python state)"
INTERNALS = re.compile(r"\b(_impl|cdll|_binary_wrapper|tms_[a-z_]*[a-z])\b")  # a symbol, not a prefix such as "tms_disk_backup_"


class Case:
    def __init__(self, test, module, function, hook_mode, env, markers):
        self.test = test
        self.module = module
        self.function = function
        self.hook_mode = hook_mode
        self.env = env
        self.markers = markers

    @property
    def name(self):
        return f"{self.test}[{self.hook_mode}]"


def _constant_list(node, names):
    if isinstance(node, (ast.List, ast.Tuple)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant)]
    if isinstance(node, ast.Name) and node.id in names:
        return list(names[node.id])
    return None


def read_cases(test_dir):
    """The cases of test_dir/test_examples.py: one per test function and hook mode."""
    path = os.path.join(test_dir, "test_examples.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    names = {"_HOOK_MODES": HOOK_MODES}
    cases = []
    for fn in tree.body:
        if not (isinstance(fn, ast.FunctionDef) and fn.name.startswith("test_")):
            continue
        modes, markers = None, []
        for deco in fn.decorator_list:
            if isinstance(deco, ast.Name):
                markers.append(deco.id)
            elif isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "parametrize":
                if isinstance(deco.args[0], ast.Constant) and deco.args[0].value == "hook_mode":
                    modes = _constant_list(deco.args[1], names)
            elif isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "skipif":
                reason = next((k.value.value for k in deco.keywords if k.arg == "reason" and isinstance(k.value, ast.Constant)), "")
                markers.append(f"skipif: {reason}")
        env, target, mode = {}, None, None
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "change_env" and len(node.args) == 2:
                if all(isinstance(a, ast.Constant) for a in node.args):
                    env[node.args[0].value] = node.args[1].value
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_test_core" and node.args:
                first = node.args[0]
                if isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name):
                    target = (first.value.id, first.attr)
                for k in node.keywords:
                    if k.arg == "hook_mode" and isinstance(k.value, ast.Constant):
                        mode = k.value.value
        if target is None:
            continue
        for m in modes or [mode or "torch"]:
            cases.append(Case(fn.name, target[0], target[1], m, env, markers))
    return cases


def example_sources(test_dir, module, function):
    """{name: source} of examples/<module>.py's <function> and of the module's functions it calls,
    directly or through others (empty where it is not there)."""
    path = os.path.join(test_dir, "examples", f"{module}.py")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return {}
    functions = {n.name: n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)}
    sources, todo = {}, [function]
    while todo:
        name = todo.pop()
        if name in sources or name not in functions:
            continue
        sources[name] = ast.get_source_segment(text, functions[name]) or ""
        todo.extend(c.func.id for c in ast.walk(functions[name]) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name))
    return sources


def not_applicable(case, test_dir, devices):
    """Why `case` does not apply to gpumem on this machine, or None."""
    for marker in case.markers:
        if marker in OTHER_MACHINE:
            return OTHER_MACHINE[marker]
        if marker == "_multi_device_only" and devices < 2:
            return f"needs two CUDA devices; this host has {devices}"
        if marker.startswith("skipif:") and "XPU" in marker and "only" in marker:
            return marker[len("skipif: "):]
    where = {}
    for name, source in example_sources(test_dir, case.module, case.function).items():
        for symbol in INTERNALS.findall(source):
            where.setdefault(symbol, set()).add(name)
    if where:
        used = "; ".join(f"{symbol} in {' and '.join(sorted(names))}" for symbol, names in sorted(where.items()))
        return INTERNALS_REASON + f" ({used})"
    return None


def run_case(case, test_dir, timeout):
    """(status, reason, seconds, output tail) of one case in a fresh interpreter."""
    code = (
        f"from examples import {case.module} as m\n"
        f"m.{case.function}(hook_mode={case.hook_mode!r})\n"
        f"print({PASSED!r}, flush=True)\n"
    )
    env = dict(os.environ)
    env.update(case.env)
    env["PYTHONPATH"] = os.pathsep.join([SHIM, test_dir, BINDINGS] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["PYTHONUNBUFFERED"] = "1"
    start = time.perf_counter()
    # A session of its own: a timeout kills the example and every process it started.
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=test_dir, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        return "fail", f"timed out after {timeout:.0f} s", time.perf_counter() - start, (stdout + stderr)[-3000:]
    seconds = time.perf_counter() - start
    output = stdout + stderr
    if proc.returncode == 0 and PASSED in stdout:
        return "pass", "", seconds, output[-3000:]
    if proc.returncode < 0:
        reason = f"killed by signal {-proc.returncode}"
    else:
        lines = [line for line in stderr.strip().splitlines() if line.strip()]
        reason = (lines[-1] if lines else f"exit {proc.returncode}")[:300]
    return "fail", reason, seconds, output[-3000:]


def device_count():
    try:
        import torch

        return torch.cuda.device_count()
    except Exception:  # noqa: BLE001
        return 0


def main(argv=None):
    p = argparse.ArgumentParser(description="torch_memory_saver's test_examples.py cases against gpumem_torch.saver.")
    p.add_argument("test_dir", help="the peer's test/ folder at 4a43c97 (with test_examples.py and examples/)")
    p.add_argument("--out", default=os.path.join(HERE, "out"), help="folder of peer_tests.json (default bench/sleep/out)")
    p.add_argument("--json", help="where to write the JSON (default OUT/peer_tests.json)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per case (default 300)")
    p.add_argument("--only", help="comma-separated example modules or test names to run (default all)")
    p.add_argument("--list", action="store_true", help="print the cases and whether each applies; run nothing")
    args = p.parse_args(argv)
    test_dir = os.path.abspath(args.test_dir)
    if not os.path.isfile(os.path.join(test_dir, "test_examples.py")):
        p.error(f"{test_dir} has no test_examples.py: give the peer's test/ folder")
    cases = read_cases(test_dir)
    if args.only:
        wanted = set(args.only.split(","))
        cases = [c for c in cases if c.module in wanted or c.test in wanted]
    devices = device_count()
    rows, results = [], []
    for case in cases:
        reason = not_applicable(case, test_dir, devices)
        if reason is not None:
            status, seconds, tail = "not applicable", 0.0, ""
            if reason.startswith(INTERNALS_REASON) and devices > 0 and not args.list:
                # Run anyway, to say how far its steps go against the drop-in before the internals.
                print(f"== {case.name} (not applicable, run anyway)", flush=True)
                ran, why, seconds, tail = run_case(case, test_dir, args.timeout)
                reason += "; run anyway: " + ("it passed" if ran == "pass" else f"stopped at: {why}")
                print(f"   {reason}", flush=True)
        elif args.list:
            status, reason, seconds, tail = "to run", "", 0.0, ""
        elif devices == 0:
            status, reason, seconds, tail = "not run", "no CUDA device", 0.0, ""
        else:
            print(f"== {case.name} ({case.module}.{case.function}, env {case.env or '{}'})", flush=True)
            status, reason, seconds, tail = run_case(case, test_dir, args.timeout)
            print(f"   {status} in {seconds:.1f} s {reason}", flush=True)
        results.append({"test": case.name, "example": f"{case.module}.{case.function}", "hook_mode": case.hook_mode,
                        "env": case.env, "status": status, "reason": reason, "seconds": round(seconds, 1), "output_tail": tail})
        rows.append((case.name, f"{case.module}.{case.function}", status, reason))
    print(markdown_table(("test", "example", "result", "why"), rows))
    counts = {s: sum(r["status"] == s for r in results) for s in ("pass", "fail", "not applicable", "not run", "to run")}
    print(", ".join(f"{n} {s}" for s, n in counts.items() if n))
    if args.list:
        return 0
    doc = {"benchmark": "sleep-peer-tests", "date": utc_now(), "commit": commit(), "peer_test_dir": test_dir,
           "devices": devices, "counts": counts, "cases": results}
    print(f"JSON: {write_json(doc, args, 'peer_tests.json')}")
    return 1 if counts["fail"] or counts["not run"] else 0


if __name__ == "__main__":
    sys.exit(main())
