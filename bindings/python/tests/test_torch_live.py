"""Tests of bench/torch-live (run.py, summary.py, run.sh).

- Most cases need neither PyTorch nor a GPU: argument handling, the configuration table, where the
  library is looked for, the time estimate from bench/traces/manifest.json, the table and verdicts
  on canned result lines (test fixtures, not measurements), and run.sh's loop with a stand-in
  interpreter that answers for the programs.
- LiveTests run graphsage for real under torch-default and gpumem-pool when PyTorch sees a CUDA
  device and libgpumem_torch.so exists; otherwise they are skipped with the reason.
"""

from support import load_script, torch_cuda_reason
import gzip
import inspect
import json
import math
import os
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
LIVE = os.path.join(REPO, "bench", "torch-live")
RUN_PY = os.path.join(LIVE, "run.py")
SUMMARY_PY = os.path.join(LIVE, "summary.py")
RUN_SH = os.path.join(LIVE, "run.sh")
GIB = 1 << 30




run = load_script("torch_live_run", RUN_PY)
summary = load_script("torch_live_summary", SUMMARY_PY)


def _py(*args, env=None):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, timeout=120)


def canned(program, config, repeat, reserved_gib, step_ms, values, ok=True, allocated_gib=1.0, steps=6, warmup=2):
    """A result line as run.sh writes it (a fixture)."""
    line = {"program": program, "config": config, "repeat": repeat, "steps": steps, "warmup": warmup, "ok": ok, "exit": 0 if ok else 1}
    if ok:
        line.update({
            "peak_reserved_bytes": int(reserved_gib * GIB),
            "peak_allocated_bytes": int(allocated_gib * GIB),
            "step_ms_median": step_ms,
            "step_ms_min": step_ms - 1,
            "step_ms_max": step_ms + 2,
            "values": values,
        })
    else:
        line["error"] = "exit 1: CUDA out of memory"
    return line


LOSSES = [10.5, 9.75, 9.0, 8.5, 8.25, 8.0]


class ArgumentTests(unittest.TestCase):
    def test_dry_run_prints_the_plan_without_pytorch(self):
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF="garbage_collection_threshold:0.6", GPUMEM_POOL_MAX_RESERVED="1GiB")
        env.pop("GPUMEM_TORCH_LIB", None)
        r = _py(RUN_PY, "--program", "resnet50", "--config", "gpumem-async", "--dry-run", env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        plan = json.loads(r.stdout)
        self.assertEqual(plan["sets"], {"GPUMEM_ALLOCATOR": "async"})
        self.assertIn("PYTORCH_CUDA_ALLOC_CONF", plan["removes"])
        self.assertIn("GPUMEM_POOL_MAX_RESERVED", plan["removes"])
        self.assertEqual((plan["steps"], plan["warmup"], plan["step_events"]), (6, 2, 6))
        self.assertTrue(plan["library"].endswith("libgpumem_torch.so"))

    def test_bad_arguments_are_refused_with_the_reason(self):
        cases = [
            (["--program", "bert", "--config", "torch-default"], "--program must be one of"),
            (["--program", "resnet50", "--config", "torch-cuda"], "--config must be one of"),
            (["--program", "resnet50", "--config", "torch-default", "--steps", "0"], "--steps must be at least 1"),
            (["--program", "resnet50", "--config", "torch-default", "--warmup", "0"], "--warmup must be at least 1"),
            (["--program", "seed_gcn", "--config", "torch-default", "--steps", "2"], "leaves no measured step"),
            (["--estimate", "--programs", "seed_gcn,bert"], "unknown program"),
            (["--estimate", "--repeats", "0"], "--repeats must be at least 1"),
        ]
        for argv, message in cases:
            with self.subTest(argv=argv):
                r = _py(RUN_PY, *argv, "--dry-run")
                self.assertEqual(r.returncode, 2, r.stdout)
                self.assertIn(message, r.stderr)

    def test_steps_count_each_forward_of_generation(self):
        self.assertEqual(run.step_events("gpt2_generate", 6), 21)  # 3 prompts x (1 + 6 tokens)
        self.assertEqual(run.step_events("graphsage", 6), 6)
        _, args = run.parse_args(["--program", "gpt2_generate", "--config", "torch-default", "--steps", "1", "--warmup", "5"])
        self.assertEqual(args.steps, 1)  # 6 forwards: one more than the warm-up

    def test_step_times_leave_out_the_warmup(self):
        every, measured = run.step_times_ms([1.0, 1.5, 1.75, 2.0, 2.5], warmup=2)
        self.assertEqual(every, [500.0, 250.0, 250.0, 500.0])
        self.assertEqual(measured, [250.0, 250.0, 500.0])  # steps 2, 3 and 4 (from 0)

    def test_record_passes_no_hook_by_default(self):
        record = run.record
        for name, runner in record.RUNNERS.items():
            with self.subTest(program=name):
                self.assertIsNone(inspect.signature(runner).parameters["on_step"].default)
        self.assertEqual(set(record.RUNNERS), set(record.WORKLOADS))


class ConfigurationTests(unittest.TestCase):
    BASE = {
        "PATH": "/usr/bin",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False",
        "PYTORCH_ALLOC_CONF": "backend:cudaMallocAsync",
        "GPUMEM_ALLOCATOR": "uvm",
        "GPUMEM_TRACE": "/tmp/t.jsonl",
        "GPUMEM_TORCH_LIB": "/opt/lib.so",
    }

    def test_each_configuration_sets_its_variables_and_removes_the_rest(self):
        expected = {
            "torch-default": {},
            "torch-expandable": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
            "gpumem-pool": {"GPUMEM_ALLOCATOR": "pool"},
            "gpumem-async": {"GPUMEM_ALLOCATOR": "async"},
            "gpumem-expandable": {"GPUMEM_ALLOCATOR": "expandable"},
        }
        self.assertEqual(list(run.CONFIGS), list(expected))
        for name, variables in expected.items():
            with self.subTest(config=name):
                env = run.config_environment(name, self.BASE)
                self.assertEqual(env, {"PATH": "/usr/bin", "GPUMEM_TORCH_LIB": "/opt/lib.so", **variables})
                self.assertEqual(run.CONFIGS[name][0], "gpumem" if name.startswith("gpumem-") else "torch")
        self.assertEqual(self.BASE["GPUMEM_ALLOCATOR"], "uvm")  # the caller's dict is left alone

    def test_gpumem_configurations_name_strategies_of_the_library(self):
        sys.path.insert(0, os.path.dirname(HERE))
        import gpumem_torch

        for name, (allocator, variables) in run.CONFIGS.items():
            if allocator == "gpumem":
                self.assertIn(variables["GPUMEM_ALLOCATOR"], gpumem_torch.STRATEGIES)

    def test_unknown_configuration_raises(self):
        with self.assertRaises(KeyError):
            run.config_environment("torch-cuda", {})

    def test_configs_flag_prints_the_table(self):
        r = _py(RUN_PY, "--configs")
        self.assertEqual(r.returncode, 0, r.stderr)
        table = json.loads(r.stdout)
        self.assertEqual(table["torch-expandable"], {"allocator": "torch", "sets": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}})

    def test_library_lookup_order(self):
        with tempfile.TemporaryDirectory() as d:
            wheel = os.path.join(d, "libgpumem_torch.so")
            open(wheel, "w").close()
            self.assertEqual(run.find_library({"GPUMEM_TORCH_LIB": "/x/lib.so"}, lambda: wheel), ("/x/lib.so", "$GPUMEM_TORCH_LIB"))
            self.assertEqual(run.find_library({}, lambda: wheel), (wheel, "the installed gpumem-torch wheel"))
            path, source = run.find_library({}, lambda: None)
            self.assertEqual(path, os.path.join(REPO, "native", "build", "Release", "libgpumem_torch.so"))
            self.assertEqual(source, "the repository's native build")


class EstimateTests(unittest.TestCase):
    def setUp(self):
        with open(run.MANIFEST) as f:
            self.manifest = json.load(f)

    def test_bounds_from_the_manifest(self):
        per, (low, high) = run.estimate_seconds(self.manifest, list(run.record.WORKLOADS), list(run.CONFIGS), 3, 6)
        self.assertEqual(set(per), set(run.record.WORKLOADS))
        for program, (a, b) in per.items():
            runs = [t for t in self.manifest["traces"] if t["workload"] == program]
            startup = min(t["wall_seconds"] - t["result"]["seconds"] for t in runs)
            self.assertGreaterEqual(a, startup)
            self.assertLessEqual(a, b)
            self.assertLessEqual(b, max(t["wall_seconds"] for t in runs) * max(1, 6 / min(t["steps"] for t in runs)))
        self.assertAlmostEqual(low, sum(a for a, _ in per.values()) * 15)
        self.assertAlmostEqual(high, sum(b for _, b in per.values()) * 15)

    def test_a_hand_made_manifest(self):
        manifest = {"traces": [
            {"workload": "resnet50", "steps": 10, "wall_seconds": 9.0, "result": {"seconds": 4.0}},
            {"workload": "resnet50", "steps": 10, "wall_seconds": 12.0, "result": {"seconds": 5.0}},
            {"workload": "seed_gcn", "steps": 10, "wall_seconds": 1.0, "error": "failed"},
        ]}
        per, total = run.estimate_seconds(manifest, ["resnet50"], ["torch-default", "gpumem-pool"], 2, 5)
        self.assertEqual(per["resnet50"], (5.0 + 2.0, 9.0))  # start-up 5 + 4 s x [0.5, 1]
        self.assertEqual(total, (28.0, 36.0))
        per, _ = run.estimate_seconds(manifest, ["resnet50"], ["torch-default"], 1, 20)
        self.assertEqual(per["resnet50"], (9.0, 5.0 + 8.0))
        with self.assertRaisesRegex(ValueError, "seed_gcn: no successful run"):
            run.estimate_seconds(manifest, ["seed_gcn"], ["torch-default"], 1, 5)

    def test_estimate_flag(self):
        r = _py(RUN_PY, "--estimate", "--programs", "seed_gcn", "--repeats", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"5 processes of 6 steps: \d+\.\d-\d+\.\d min")


class SummaryTests(unittest.TestCase):
    def grid(self):
        rows = []
        for repeat in (1, 2, 3):
            rows.append(canned("resnet50", "torch-default", repeat, 6.5, 100.0, LOSSES, allocated_gib=5.0))
            rows.append(canned("resnet50", "torch-expandable", repeat, 5.6, 103.0, LOSSES, allocated_gib=5.0))
            rows.append(canned("resnet50", "gpumem-pool", repeat, 6.5, 99.0, LOSSES, allocated_gib=5.0))
            rows.append(canned("resnet50", "gpumem-expandable", repeat, 5.5 + repeat * 0.01, 101.5, [v * (1 + 2e-5) for v in LOSSES], allocated_gib=5.0))
            rows.append(canned("resnet50", "gpumem-async", repeat, 5.0, 150.0, LOSSES, allocated_gib=5.0))
        return rows

    def test_medians_and_loss_matching(self):
        (group,) = summary.summarise(self.grid())
        self.assertEqual((group["program"], group["steps"], group["warmup"]), ("resnet50", 6, 2))
        self.assertEqual(list(group["configs"]), list(run.CONFIGS))
        ex = group["configs"]["gpumem-expandable"]
        self.assertEqual((ex["ok"], ex["runs"]), (3, 3))
        self.assertEqual(ex["peak_reserved_bytes"], int(5.52 * GIB))
        self.assertAlmostEqual(ex["reserved_per_allocated"], 5.52 / 5.0, places=6)
        self.assertEqual((ex["step_ms_median"], ex["step_ms_min"], ex["step_ms_max"]), (101.5, 100.5, 103.5))
        self.assertTrue(ex["values_match"])
        self.assertAlmostEqual(ex["max_deviation"], 2e-5, delta=1e-7)
        self.assertEqual(group["configs"]["torch-default"]["max_deviation"], 0.0)

    def test_verdict_yes_names_every_strategy_within_both_limits(self):
        answer, why = summary.verdict(summary.summarise(self.grid())[0])
        self.assertEqual(answer, "yes")
        self.assertIn("gpumem-expandable (5.52 GiB, 101.5 ms)", why)
        self.assertNotIn("gpumem-pool (", why)  # 6.5 GiB > torch-expandable's 5.6
        self.assertNotIn("gpumem-async (", why)  # 150 ms > 102 ms

    def test_verdict_no_when_slower_than_two_percent_more(self):
        rows = [r for r in self.grid() if r["config"] != "gpumem-expandable" and r["config"] != "gpumem-pool"]
        answer, why = summary.verdict(summary.summarise(rows)[0])
        self.assertEqual(answer, "no")
        self.assertIn("gpumem-async: 150.0 ms", why)
        self.assertIn("+2%: 102.0 ms", why)
        edge = [canned("resnet50", c, 1, 5.6, ms, LOSSES) for c, ms in
                (("torch-default", 100.0), ("torch-expandable", 90.0), ("gpumem-pool", 102.0))]
        self.assertEqual(summary.verdict(summary.summarise(edge)[0])[0], "yes")  # exactly +2%, as much as expandable
        edge[2]["step_ms_median"] = 102.01
        self.assertEqual(summary.verdict(summary.summarise(edge)[0])[0], "no")

    def test_a_loss_beyond_the_tolerance_or_a_failed_run_disqualifies(self):
        rows = self.grid()
        for r in rows:
            if r["config"] == "gpumem-expandable" and r["repeat"] == 2:
                r["values"] = LOSSES[:-1] + [LOSSES[-1] * (1 + 3e-4)]
        (group,) = summary.summarise(rows)
        self.assertFalse(group["configs"]["gpumem-expandable"]["values_match"])
        answer, why = summary.verdict(group)
        self.assertEqual(answer, "no")
        self.assertIn("gpumem-expandable: losses differ", why)
        looser = summary.summarise(rows, rtol=1e-3)[0]
        self.assertTrue(looser["configs"]["gpumem-expandable"]["values_match"])

        rows = self.grid()
        rows[3] = canned("resnet50", "gpumem-expandable", 1, 0, 0, [], ok=False)
        answer, why = summary.verdict(summary.summarise(rows)[0])
        self.assertEqual(answer, "no")
        self.assertIn("gpumem-expandable: 1 of 3 runs failed", why)

    def test_runs_that_disagree_leave_the_time_undecided(self):
        # torch-default's runs' medians 100 and 130 ms: a 2% comparison means nothing
        rows = self.grid()
        for r in rows:
            if r["config"] == "torch-default" and r["repeat"] == 2:
                r["step_ms_median"] = 130.0
        (group,) = summary.summarise(rows)
        self.assertEqual(group["configs"]["torch-default"]["step_ms_run_medians"], [100.0, 130.0, 100.0])
        answer, why = summary.verdict(group)
        self.assertEqual(answer, "undecided")
        self.assertIn("time not established", why)
        self.assertIn("gpumem-expandable (5.52 GiB; torch-default's runs' medians 100.0-130.0 ms)", why)
        self.assertIn("gpumem-pool: 6.50 GiB", why)  # over the memory limit: still said
        self.assertNotIn("150.0 ms", why)  # no time judged against noisy runs
        # a strategy's own runs that disagree: it is undecided, another may still win
        rows = self.grid()
        for r in rows:
            if r["config"] == "gpumem-expandable" and r["repeat"] == 3:
                r["step_ms_median"] = 120.0
        answer, why = summary.verdict(summary.summarise(rows)[0])
        self.assertEqual(answer, "undecided")
        self.assertIn("gpumem-expandable (5.52 GiB; its runs' medians 101.5-120.0 ms)", why)
        # within 10%: judged as before
        rows = self.grid()
        for r in rows:
            if r["config"] == "torch-default" and r["repeat"] == 2:
                r["step_ms_median"] = 109.0
        self.assertEqual(summary.verdict(summary.summarise(rows)[0])[0], "yes")

    def test_values_match(self):
        self.assertEqual(summary.values_match([1.0, 2.0], [1.0, 2.0], 1e-4), (True, 0.0))
        self.assertTrue(summary.values_match([1.0, 2.0002], [1.0, 2.0], 1e-4)[0])
        self.assertFalse(summary.values_match([1.0, 2.001], [1.0, 2.0], 1e-4)[0])
        self.assertEqual(summary.values_match([1.0], [1.0, 2.0], 1e-4), (False, math.inf))
        self.assertFalse(summary.values_match([float("nan")], [1.0], 1e-4)[0])
        self.assertFalse(summary.values_match([float("nan")], [float("nan")], 1e-4)[0])

    def test_undecided_without_the_baselines(self):
        rows = [r for r in self.grid() if r["config"] != "torch-expandable"]
        self.assertEqual(summary.verdict(summary.summarise(rows)[0])[0], "undecided")
        rows = [r for r in self.grid() if r["config"] != "torch-default"]
        (group,) = summary.summarise(rows)
        self.assertNotIn("values_match", group["configs"]["gpumem-pool"])
        self.assertEqual(summary.verdict(group)[0], "undecided")
        rows = [r for r in self.grid() if r["config"].startswith("torch-")]
        self.assertEqual(summary.verdict(summary.summarise(rows)[0]), ("undecided", "no gpumem strategy ran"))

    def test_groups_by_program_and_steps(self):
        rows = self.grid() + [canned("seed_gcn", "torch-default", 1, 47.8, 130.0, [2.3] * 10, steps=10)]
        rows.append(canned("resnet50", "gpumem-pool", 4, 9.9, 1.0, LOSSES[:4], steps=4))
        groups = summary.summarise(rows)
        self.assertEqual([(g["program"], g["steps"]) for g in groups], [("resnet50", 6), ("seed_gcn", 10), ("resnet50", 4)])
        self.assertNotIn("values_match", groups[2]["configs"]["gpumem-pool"])  # no torch-default run of 4 steps

    def test_table(self):
        rows = self.grid()
        rows[3] = canned("resnet50", "gpumem-expandable", 1, 0, 0, [], ok=False)
        lines = summary.format_table(summary.summarise(rows))
        self.assertIn("peak reserved GiB", lines[0])
        self.assertIn("median step ms (min-max)", lines[0])
        row = next(line for line in lines if "gpumem-expandable" in line and not line.startswith("verdict"))
        self.assertRegex(row, r"resnet50\s+6\s+gpumem-expandable\s+2/3\s+5\.5\d\s+1\.10\d\s+101\.5 \(100\.5-103\.5\)\s+y \(2\.0e-05\)")
        self.assertTrue(lines[-1].startswith("verdict resnet50 (6 steps): no: "))

    def test_record_line_from_a_log(self):
        ok = canned("resnet50", "gpumem-pool", 2, 6.5, 99.0, LOSSES)
        log = "loading\nRESULT " + json.dumps(ok) + "\n"
        line = summary.result_line(log, 0, 12.3, "resnet50", "gpumem-pool", 2, 6, 2, "abc")
        self.assertTrue(line["ok"])
        self.assertEqual((line["wall_s"], line["commit"], line["values"]), (12.3, "abc", LOSSES))
        line = summary.result_line(log, 1, 3.0, "resnet50", "gpumem-pool", 2, 6, 2)
        self.assertFalse(line["ok"])
        self.assertTrue(line["error"].startswith("exit 1: loading"))
        line = summary.result_line("Killed", 124, 300.0, "resnet50", "gpumem-pool", 2, 6, 2)
        self.assertEqual((line["ok"], line["error"]), (False, "timed out: Killed"))
        line = summary.result_line("no result", 0, 3.0, "resnet50", "gpumem-pool", 2, 6, 2)
        self.assertTrue(line["error"].startswith("no RESULT line"))

    def test_table_command_refuses_bad_input(self):
        with tempfile.TemporaryDirectory() as d:

            def refused(name, text):
                """table's stderr for a file NAME holding TEXT, after checking that it exits 2."""
                path = os.path.join(d, name)
                with open(path, "w") as f:
                    f.write(text)
                r = _py(SUMMARY_PY, "table", path)
                self.assertEqual(r.returncode, 2, r.stdout)
                return r.stderr

            self.assertIn("bad.jsonl:1: not a run.sh result (no config, repeat, steps, warmup, ok)",
                          refused("bad.jsonl", '{"program": "resnet50"}\n'))
            self.assertIn("not a JSON line", refused("bad.jsonl", "{oops\n"))
            self.assertIn("fake.jsonl.gz: not readable as gzipped JSON lines", refused("fake.jsonl.gz", "{}\n"))
            self.assertIn("no such file", _py(SUMMARY_PY, "table", os.path.join(d, "none.jsonl")).stderr)
            good = os.path.join(d, "good.jsonl")
            with open(good, "w") as f:
                f.write("".join(json.dumps(r) + "\n" for r in self.grid()))
            self.assertIn("--rtol must be", _py(SUMMARY_PY, "table", good, "--rtol", "-1").stderr)
            r = _py(SUMMARY_PY, "table", good)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("verdict resnet50 (6 steps): yes: gpumem-expandable", r.stdout)
            # gzipped results (as committed under bench/torch-live/results) read the same
            packed = os.path.join(d, "good.jsonl.gz")
            with open(good, "rb") as f, gzip.open(packed, "wb") as g:
                g.write(f.read())
            self.assertEqual(_py(SUMMARY_PY, "table", packed).stdout, r.stdout)


# A stand-in for the interpreter that run.sh starts: it answers the PyTorch check and the program
# runs (canned RESULT lines, gpumem-async failing) and passes every other call to Python.
FAKE_PYTHON = r'''#!{python}
import json, os, sys
args = sys.argv[1:]
if args[:1] == ["-c"] and "import torch" in args[1]:
    sys.exit(0)
if args and args[0].endswith("run.py") and "--program" in args and "--dry-run" not in args:
    get = lambda flag: args[args.index(flag) + 1]
    config = get("--config")
    with open(os.environ["FAKE_CALLS"], "a") as f:
        f.write(" ".join([get("--program"), config, get("--repeat"), get("--steps"), get("--warmup"), os.environ.get("GPUMEM_TORCH_LIB", "-")]) + "\n")
    if config == "gpumem-async":
        print("CUDA out of memory", file=sys.stderr)
        sys.exit(1)
    reserved = {{"torch-default": 6.5, "torch-expandable": 5.6}}.get(config, 5.5)
    print("RESULT " + json.dumps({{"program": get("--program"), "config": config, "peak_reserved_bytes": int(reserved * 2**30),
        "peak_allocated_bytes": 5 * 2**30, "step_ms_median": 100.0, "step_ms_min": 99.0, "step_ms_max": 101.0,
        "values": [2.5, 2.25, 2.0]}}))
    sys.exit(0)
os.execv({python!r}, [{python!r}] + args)
'''


class RunShTests(unittest.TestCase):
    def run_sh(self, tmp, **env_vars):
        fake = os.path.join(tmp, "python")
        with open(fake, "w") as f:
            f.write(FAKE_PYTHON.format(python=sys.executable))
        os.chmod(fake, os.stat(fake).st_mode | stat.S_IEXEC)
        lib = os.path.join(tmp, "libgpumem_torch.so")
        open(lib, "w").close()
        env = dict(os.environ, PYTHON=fake, OUT=os.path.join(tmp, "out"), FAKE_CALLS=os.path.join(tmp, "calls"),
                   GPUMEM_TORCH_LIB=lib, GPUMEM_COMMIT="0123abc")
        env.update(env_vars)
        return subprocess.run(["bash", RUN_SH], capture_output=True, text=True, env=env, timeout=300)

    def test_the_grid_one_process_at_a_time_then_the_table(self):
        with tempfile.TemporaryDirectory() as tmp:
            r = self.run_sh(tmp, PROGRAMS="resnet50,graphsage", REPEATS="2", STEPS="4", WARMUP="1")
            self.assertEqual(r.returncode, 4, r.stderr)  # gpumem-async fails: 2 programs x 2 repeats
            with open(os.path.join(tmp, "calls")) as f:
                calls = [line.split() for line in f]
            lib = os.path.join(tmp, "libgpumem_torch.so")
            expected = [[p, c, str(rep), "4", "1", lib] for p in ("resnet50", "graphsage") for rep in (1, 2) for c in run.CONFIGS]
            self.assertEqual(calls, expected)
            with open(os.path.join(tmp, "out", "results.jsonl")) as f:
                lines = [json.loads(line) for line in f]
            self.assertEqual(len(lines), 20)
            self.assertEqual(sum(not line["ok"] for line in lines), 4)
            self.assertTrue(all(line["commit"] == "0123abc" and line["steps"] == 4 and "wall_s" in line for line in lines))
            self.assertEqual(sorted(os.listdir(os.path.join(tmp, "out"))), ["results.jsonl", "runs.log"])
            with open(os.path.join(tmp, "out", "runs.log")) as f:
                log = f.read()
            self.assertEqual(log.count("\n== "), 19)
            self.assertRegex(log, r"== graphsage gpumem-async repeat 2/2 \(4 steps\) \S+ exit 1\nCUDA out of memory")
            self.assertIn("verdict resnet50 (4 steps): yes: gpumem-pool (5.50 GiB, 100.0 ms), gpumem-expandable", r.stdout)
            self.assertRegex(r.stdout, r"gpumem-async\s+0/2\s+-")
            self.assertIn("20 processes in", r.stderr)
            # A second call appends, and the table covers both.
            r = self.run_sh(tmp, PROGRAMS="seed_gcn", CONFIGS="torch-default torch-expandable", REPEATS="1")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("verdict seed_gcn (6 steps): undecided: no gpumem strategy ran", r.stdout)
            self.assertIn("verdict resnet50 (4 steps): yes", r.stdout)

    def test_bad_settings_stop_before_any_run(self):
        cases = [
            ({"PROGRAMS": "bert"}, "--program must be one of"),
            ({"CONFIGS": "torch-default torch-cuda"}, "--config must be one of"),
            ({"REPEATS": "x"}, "REPEATS must be a positive integer"),
            ({"STEPS": "0"}, "--steps must be at least 1"),
            ({"CONFIGS": ","}, "PROGRAMS and CONFIGS must name at least one each"),
            ({"RTOL": "-1"}, "RTOL must be a number >= 0"),
            ({"RUN_TIMEOUT": "0"}, "RUN_TIMEOUT must be a positive integer"),
            ({"GPUMEM_TORCH_LIB": "/nonexistent/libgpumem_torch.so"}, "/nonexistent/libgpumem_torch.so does not exist"),
        ]
        for env_vars, message in cases:
            with self.subTest(env=env_vars), tempfile.TemporaryDirectory() as tmp:
                r = self.run_sh(tmp, **env_vars)
                self.assertEqual(r.returncode, 2, r.stdout)
                self.assertIn(message, r.stderr)
                self.assertFalse(os.path.exists(os.path.join(tmp, "calls")))


TORCH_REASON = torch_cuda_reason()
sys.path.insert(0, os.path.dirname(HERE))
import gpumem_torch  # noqa: E402

LIVE_REASON = TORCH_REASON or (None if os.path.exists(gpumem_torch.library_path()) else f"libgpumem_torch.so not found at {gpumem_torch.library_path()}")
if LIVE_REASON:
    print(f"[test_torch_live] live runs skipped: {LIVE_REASON}", file=sys.stderr)


@unittest.skipIf(LIVE_REASON, LIVE_REASON or "")
class LiveTests(unittest.TestCase):
    """graphsage (PyTorch only: no transformers or torchvision needed) for real, 4 steps."""

    def live(self, config):
        env = dict(os.environ, GPUMEM_TORCH_LIB=gpumem_torch.library_path())
        r = _py(RUN_PY, "--program", "graphsage", "--config", config, "--steps", "4", "--warmup", "1", env=env)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        (line,) = [json.loads(s[len("RESULT "):]) for s in r.stdout.splitlines() if s.startswith("RESULT ")]
        return line

    def test_graphsage_under_torch_and_gpumem(self):
        torch_line, gpumem_line = self.live("torch-default"), self.live("gpumem-pool")
        self.assertEqual(torch_line["stats_from"], "torch.cuda.memory_stats")
        self.assertEqual(gpumem_line["stats_from"], "gpumem_torch.memory_stats")
        self.assertTrue(gpumem_line["allocator_config"].startswith("strategy=pool"))
        for line in (torch_line, gpumem_line):
            self.assertEqual(len(line["values"]), 4)
            self.assertEqual(len(line["step_ms"]), 3)
            self.assertGreater(line["peak_allocated_bytes"], 0)
            self.assertGreaterEqual(line["peak_reserved_bytes"], line["peak_allocated_bytes"])
            self.assertTrue(line["step_ms_min"] <= line["step_ms_median"] <= line["step_ms_max"])
            self.assertEqual(line["info"]["final_loss"], line["values"][-1])
        match, worst = summary.values_match(gpumem_line["values"], torch_line["values"], summary.DEFAULT_RTOL)
        self.assertTrue(match, f"losses {gpumem_line['values']} against {torch_line['values']} (deviation {worst})")


if __name__ == "__main__":
    unittest.main()
