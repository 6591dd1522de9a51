"""Tests of libgpumem_torch.so and gpumem_torch.py (npm run test:torch, i.e.
``python3 -m unittest discover -s bindings/python/tests -v``).

The allocator has to be chosen before CUDA is initialised, so every PyTorch case runs
torch_worker.py in a process of its own and reads the JSON it prints.

- ConfigTests need only the built library (no PyTorch, no GPU).
- TorchTests need PyTorch with a CUDA device as well; otherwise they are skipped with the reason.

The library is found at $GPUMEM_TORCH_LIB or native/build/Release/libgpumem_torch.so.
"""

from support import torch_cuda_reason
import json
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.dirname(HERE)
WORKER = os.path.join(HERE, "torch_worker.py")
sys.path.insert(0, BINDINGS)

import gpumem_torch  # noqa: E402

HAVE_LIB = os.path.exists(gpumem_torch.library_path())
LIB_REASON = f"libgpumem_torch.so not found at {gpumem_torch.library_path()} (build native/ with CUDA or set GPUMEM_TORCH_LIB)"


def _torch_cuda_reason():
    return torch_cuda_reason() or (None if HAVE_LIB else LIB_REASON)


TORCH_REASON = _torch_cuda_reason()
if TORCH_REASON:
    print(f"[test_torch] PyTorch tests skipped: {TORCH_REASON}", file=sys.stderr)
if not HAVE_LIB:
    print(f"[test_torch] library tests skipped: {LIB_REASON}", file=sys.stderr)


def plain_strategies():
    """The strategies GPUMEM_ALLOCATOR takes that need no options (the plug-in's: test_plugin.py),
    from the library's registry."""
    return tuple(s["name"] for s in gpumem_torch.strategies() if not s["flags"]["requiresOptions"])


def _env(**overrides):
    # Every gpumem setting of the calling environment left out, the library's path kept.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUMEM_")}
    env["GPUMEM_TORCH_LIB"] = gpumem_torch.library_path()
    env["PYTHONUNBUFFERED"] = "1"
    env.update(overrides)
    return env


def run_worker(*args, timeout=900, **env):
    proc = subprocess.run(
        [sys.executable, WORKER, *args], capture_output=True, text=True, env=_env(**env), timeout=timeout
    )
    for line in proc.stdout.splitlines():
        if line.startswith("GPUMEM_WORKER_RESULT "):
            result = json.loads(line[len("GPUMEM_WORKER_RESULT ") :])
            result["returncode"] = proc.returncode
            return result
    raise AssertionError(
        f"worker {args} printed no result (exit code {proc.returncode})\n"
        f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    )


_CHECK = (
    "import json, sys; sys.path.insert(0, {bindings!r}); import gpumem_torch\n"
    "try:\n"
    "    print(json.dumps({{'config': gpumem_torch.check_config()}}))\n"
    "except ValueError as e:\n"
    "    print(json.dumps({{'error': str(e)}}))\n"
)


def check_config(**env):
    proc = subprocess.run(
        [sys.executable, "-c", _CHECK.format(bindings=BINDINGS)], capture_output=True, text=True, env=_env(**env), timeout=60
    )
    if proc.returncode != 0:
        raise AssertionError(f"config check crashed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


@unittest.skipUnless(HAVE_LIB, LIB_REASON)
class ConfigTests(unittest.TestCase):
    """The environment is read and validated by the library, without PyTorch or CUDA."""

    def test_default_is_expandable(self):
        self.assertEqual(check_config()["config"], "strategy=expandable expandable.unmap_idle_before_growth=0 oom=raise")
        on = check_config(GPUMEM_EXPANDABLE_UNMAP_IDLE_BEFORE_GROWTH="1")["config"]
        self.assertEqual(on, "strategy=expandable expandable.unmap_idle_before_growth=1 oom=raise")
        # another strategy's variable, with GPUMEM_ALLOCATOR unset, is an error rather than ignored
        error = check_config(GPUMEM_POOL_MAX_RESERVED="1GiB")["error"]
        self.assertIn("GPUMEM_POOL_MAX_RESERVED='1GiB'", error)
        self.assertIn("the default strategy is expandable", error)

    def test_each_strategy(self):
        for name in plain_strategies():
            with self.subTest(strategy=name):
                self.assertTrue(check_config(GPUMEM_ALLOCATOR=name)["config"].startswith(f"strategy={name} "))
        self.assertTrue(check_config(GPUMEM_ALLOCATOR="UVM")["config"].startswith("strategy=uvm "))

    def test_strategies_are_the_registry(self):
        # In this process: listing reads no configuration and needs neither PyTorch nor a GPU.
        listed = gpumem_torch.strategies()
        self.assertEqual(tuple(s["name"] for s in listed), gpumem_torch.STRATEGIES)
        every = gpumem_torch.strategies(all_registered=True)
        self.assertEqual([s["name"] for s in every if not s["flags"]["kernelMemory"]], ["host"])
        by_name = {s["name"]: s for s in every}
        pool = {o["key"]: o for o in by_name["pool"]["options"]}
        self.assertEqual(pool["maxReservedBytes"]["env"], "GPUMEM_POOL_MAX_RESERVED")
        self.assertEqual(pool["upstream"]["default"], "cuda")
        self.assertEqual(pool["upstream"]["choices"], ["cuda", "host"])
        self.assertEqual(pool["smallRequestLimit"]["default"], 1 << 20)
        self.assertEqual(by_name["pool"]["layer"], "cache")
        self.assertTrue(by_name["plugin"]["flags"]["requiresOptions"])
        self.assertEqual(by_name["plugin"]["aliases"], ["native"])  # its older name, listed under it
        self.assertNotIn("native", by_name)
        # GPUMEM_ALLOCATOR takes each listed name (with its required options).
        for s in listed:
            with self.subTest(strategy=s["name"]):
                env = {"GPUMEM_ALLOCATOR": s["name"]}
                env.update({o["env"]: "/x.so" for o in s["options"] if o["required"]})
                self.assertTrue(check_config(**env)["config"].startswith(f"strategy={s['name']} "))

    def test_empty_value_means_unset(self):
        self.assertTrue(check_config(GPUMEM_ALLOCATOR="")["config"].startswith("strategy=expandable "))

    def test_bad_allocator_names_variable_and_value(self):
        error = check_config(GPUMEM_ALLOCATOR="bogus")["error"]
        self.assertIn("GPUMEM_ALLOCATOR", error)
        self.assertIn("'bogus'", error)
        # The registry's strategies whose memory kernels can use, in its order.
        self.assertIn(", ".join(gpumem_torch.STRATEGIES) + ", plugin:<path>", error)
        self.assertNotIn("native", error)

    def test_host_is_registered_but_not_for_kernels(self):
        error = check_config(GPUMEM_ALLOCATOR="host")["error"]
        self.assertIn("GPUMEM_ALLOCATOR='host'", error)
        self.assertIn("not usable by CUDA kernels", error)

    def test_sizes(self):
        cases = {"1048576": 1048576, "512MiB": 512 << 20, "4gib": 4 << 30, "64KiB": 64 << 10, "1TiB": 1 << 40}
        # a fraction with a unit, rounded down to whole bytes (0.1KiB is 102.4 bytes)
        cases.update({"16.5GiB": 33 << 29, "0.5 GiB": 1 << 29, "0.1KiB": 102})
        for text, value in cases.items():
            with self.subTest(size=text):
                c = check_config(GPUMEM_ALLOCATOR="pool", GPUMEM_POOL_MAX_RESERVED=text)["config"]
                self.assertIn(f"pool.max_reserved={value}", c)
        c = check_config(GPUMEM_ALLOCATOR="async", GPUMEM_ASYNC_RELEASE_THRESHOLD="256MiB")["config"]
        self.assertIn(f"async.release_threshold={256 << 20}", c)
        c = check_config(GPUMEM_ALLOCATOR="uvm", GPUMEM_UVM_LIMIT="8GiB", GPUMEM_UVM_PREFETCH="0", GPUMEM_UVM_ADVISE="host")["config"]
        self.assertEqual(c, f"strategy=uvm uvm.prefetch=0 uvm.advise=host uvm.limit={8 << 30} oom=raise")
        c = check_config(GPUMEM_ALLOCATOR="tiered", GPUMEM_TIERED_DEVICE_BUDGET="8GiB", GPUMEM_TIERED_PLACEMENT="host")["config"]
        self.assertEqual(c, f"strategy=tiered tiered.device_budget={8 << 30} tiered.host_budget=default tiered.placement=host oom=raise")
        c = check_config(GPUMEM_ALLOCATOR="pinned", GPUMEM_POOL_MAX_RESERVED="1GiB")["config"]
        self.assertEqual(c, f"strategy=pinned pool.upstream=pinned pool.max_reserved={1 << 30} oom=raise")

    def test_bad_values(self):
        cases = [
            ("GPUMEM_POOL_MAX_RESERVED", "12Q"),
            ("GPUMEM_POOL_MAX_RESERVED", "1.5"),  # a fraction of a byte
            ("GPUMEM_POOL_MAX_RESERVED", "1.5e3GiB"),
            ("GPUMEM_POOL_MAX_RESERVED", "512M"),  # one set of units: KiB, MiB, GiB, TiB
            ("GPUMEM_POOL_MAX_RESERVED", "2MB"),
            ("GPUMEM_POOL_MAX_RESERVED", "-1"),
            ("GPUMEM_POOL_MAX_RESERVED", "99999999999999999999"),
            ("GPUMEM_POOL_MAX_RESERVED", "20000000T"),
            ("GPUMEM_ASYNC_RELEASE_THRESHOLD", "lots"),
            ("GPUMEM_UVM_PREFETCH", "yes"),
            ("GPUMEM_UVM_ADVISE", "gpu"),
            ("GPUMEM_UVM_LIMIT", "0"),
            ("GPUMEM_OOM", "ignore"),
            ("GPUMEM_TIERED_DEVICE_BUDGET", "8G"),
            ("GPUMEM_TIERED_HOST_BUDGET", "lots"),
            ("GPUMEM_TIERED_PLACEMENT", "gpu"),
        ]
        for name, value in cases:
            with self.subTest(variable=name, value=value):
                error = check_config(**{name: value}).get("error")
                self.assertIsNotNone(error, f"{name}={value} was accepted")
                self.assertIn(name, error)
                self.assertIn(f"'{value}'", error)
                self.assertIn("expected", error)

    def test_stats_before_any_allocation(self):
        # In this process: the library loads and reports an inactive device without CUDA.
        s = gpumem_torch.raw_stats(0)
        self.assertEqual(s["active"], 0)
        self.assertEqual(s["allocated_bytes"], 0)


@unittest.skipIf(TORCH_REASON is not None, TORCH_REASON or "")
class TorchTests(unittest.TestCase):
    """Each strategy trains the same small GCN as PyTorch's own allocator, with the same seed."""

    results = {}

    @classmethod
    def result(cls, allocator):
        if allocator not in cls.results:
            cls.results[allocator] = run_worker("--allocator", allocator, "--mode", "train")
        return cls.results[allocator]

    def check_strategy(self, name):
        ref = self.result("torch")
        self.assertTrue(ref["ok"], ref.get("traceback"))
        r = self.result(name)
        self.assertTrue(r["ok"], r.get("traceback"))
        self.assertEqual(r["returncode"], 0)
        self.assertTrue(r["config"].startswith(f"strategy={name} "), r["config"])
        # Identical losses, bit for bit, to PyTorch's caching allocator.
        self.assertEqual(len(r["losses"]), len(ref["losses"]))
        self.assertEqual(r["losses"], ref["losses"], f"{name}: {r['losses_float']} vs torch {ref['losses_float']}")
        # allocated_bytes counts exactly the live storages' nbytes.
        self.assertEqual(r["baseline_allocated"], 0)
        self.assertEqual(r["accounting_allocated"], r["accounting_expected"])
        self.assertEqual(r["accounting_live_allocations"], r["accounting_expected_count"])
        self.assertGreaterEqual(r["zero_size_allocs"], 1)
        self.assertEqual(r["accounting_after_free"], 0)
        self.assertEqual(r["delta_alloc"], 123457)
        self.assertEqual(r["delta_after_free"], 0)
        self.assertTrue(r["peak_after_reset_equals_current"])
        self.assertTrue(r["side_stream_ok"])
        # Training used memory and the peak saw it.
        self.assertGreater(r["train_stats"]["allocated_bytes.all.peak"], 0)
        self.assertGreaterEqual(r["train_stats"]["reserved_bytes.all.peak"], r["train_stats"]["allocated_bytes.all.peak"])
        # Everything freed: back to 0; no rejected frees.
        self.assertEqual(r["final_allocated"], 0, f"allocated before clearing cuBLAS workspaces: {r.get('allocated_before_workspace_clear')}")
        fs = r["final_stats"]
        self.assertEqual(fs["allocation.all.current"], 0)
        self.assertEqual(fs["gpumem.bad_frees"], 0)
        self.assertEqual(fs["gpumem.alloc_errors"], 0)
        self.assertEqual(fs["num_ooms"], 0)
        if name in ("pool", "async", "expandable", "pinned", "tiered"):
            self.assertEqual(fs["reserved_bytes.all.current"], 0, "empty_cache() gave everything back")

    def test_reference_torch_allocator(self):
        ref = self.result("torch")
        self.assertTrue(ref["ok"], ref.get("traceback"))
        self.assertEqual(ref["final_allocated"], 0)

    def test_cuda(self):
        self.check_strategy("cuda")

    def test_uvm(self):
        self.check_strategy("uvm")

    def test_pool(self):
        self.check_strategy("pool")

    def test_async(self):
        self.check_strategy("async")

    def test_expandable(self):
        self.check_strategy("expandable")

    def test_pinned(self):
        self.check_strategy("pinned")

    def test_tiered(self):
        self.check_strategy("tiered")

    def test_bad_allocator_env_raises_value_error(self):
        r = run_worker("--mode", "badenv", GPUMEM_ALLOCATOR="bogus")
        self.assertTrue(r["ok"], r.get("traceback"))
        self.assertEqual(r["returncode"], 0)
        self.assertEqual(r["raised"], "ValueError")
        self.assertIn("GPUMEM_ALLOCATOR", r["message"])
        self.assertIn("bogus", r["message"])
        self.assertTrue(r["torch_still_works"])

    def test_bad_size_env_raises_value_error(self):
        r = run_worker("--mode", "badenv", GPUMEM_POOL_MAX_RESERVED="12Q")
        self.assertTrue(r["ok"], r.get("traceback"))
        self.assertEqual(r["raised"], "ValueError")
        self.assertIn("GPUMEM_POOL_MAX_RESERVED", r["message"])
        self.assertIn("12Q", r["message"])

    def test_bad_env_without_enable_is_a_python_error(self):
        # torch's CUDAPluggableAllocator used directly: the first allocation reports the bad value.
        r = run_worker("--mode", "direct", GPUMEM_ALLOCATOR="bogus")
        self.assertTrue(r["ok"], r.get("traceback"))
        self.assertEqual(r["returncode"], 0)
        self.assertIsNotNone(r["raised"])
        self.assertIn("GPUMEM_ALLOCATOR", r["message"])

    def test_enable_after_cuda_init_raises(self):
        r = run_worker("--mode", "late")
        self.assertTrue(r["ok"], r.get("traceback"))
        self.assertEqual(r["raised"], "RuntimeError")
        self.assertIn("before CUDA is initialised", r["message"])

    def test_out_of_memory_is_a_python_error(self):
        for name in plain_strategies():
            with self.subTest(strategy=name):
                r = run_worker("--allocator", name, "--mode", "oom")
                self.assertTrue(r["ok"], r.get("traceback"))
                self.assertEqual(r["returncode"], 0)
                self.assertTrue(r["is_runtime_error"], r)
                # PyTorch's convention, then gpumem's detail (test_oom.py checks the tools' predicates).
                self.assertTrue(r["message"].startswith(f"CUDA out of memory. gpumem: {name} could not allocate"), r["message"])
                self.assertIn("largest free block", r["message"])
                # accelerate's and Lightning's out-of-memory checks (oom_predicates.py) accept it.
                self.assertEqual(r["accepted"], {k: True for k in r["accepted"]}, r["message"])
                self.assertEqual(r["num_ooms"], 1)
                self.assertTrue(r["works_after"])
                self.assertEqual(r["allocated_after"], 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
