"""libgpumem_torch.so on older CUDA drivers, on a CUDA device (bench/gpu/suite.sh torch and
torch-driver): for each of CUDA 12.0, 12.4 and 12.8, the library is loaded under the interposer
native/tests/driver/fake_cuda.c (GPUMEM_CUDA_DRIVER, GPUMEM_FAKE_DRIVER_VERSION), which reports that
version to gpumem only (PyTorch's runtime keeps the real driver) and hides the entry points that
came after it. Each strategy the library offers without options runs torch_worker.py's training (a
small GCN, 2 steps) in a process of its own: those the version supports must enable, train with the
same losses as PyTorch's own allocator and free everything; the others must be refused by
DriverUnsupportedError naming the strategy, what it needs and the versions. The processes run a few
at a time.

Without PyTorch on a CUDA device, the library or a C compiler, they are skipped with the reason.
The same refusals without a GPU: test_driver.py."""

import concurrent.futures
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
BINDINGS = os.path.dirname(HERE)
sys.path.insert(0, BINDINGS)
sys.path.insert(0, HERE)

import driver_libs  # noqa: E402
import gpumem_torch  # noqa: E402
from support import clean_env, run_code, skip_reasons, worker_result  # noqa: E402

_, TORCH_REASON = skip_reasons("test_driver_gpu", "GPU driver-version tests")
REASON = TORCH_REASON or driver_libs.compiler_reason()

VERSIONS = (12000, 12040, 12080)
WORKER = os.path.join(HERE, "torch_worker.py")
STEPS = "2"


def fake_env(version):
    return clean_env(
        PYTHONUNBUFFERED="1",
        CUBLAS_WORKSPACE_CONFIG=":4096:8",
        GPUMEM_CUDA_DRIVER=driver_libs.build("fake_cuda"),
        GPUMEM_FAKE_DRIVER_VERSION=str(version),
    )


def train(allocator, env):
    proc = subprocess.run(
        [sys.executable, WORKER, "--allocator", allocator, "--mode", "train", "--steps", STEPS],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    result = worker_result(proc.stdout)
    if result is None:
        raise AssertionError(f"{allocator}: no result (exit {proc.returncode})\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}")
    result["returncode"] = proc.returncode
    return result


@unittest.skipIf(REASON, REASON or "")
class DriverVersionGpuTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.strategies = [s["name"] for s in gpumem_torch.strategies() if not s["flags"]["requiresOptions"]]
        # What the library says each version refuses (no PyTorch in that process).
        cls.info = {
            v: run_code("import json, gpumem_torch\nprint(json.dumps(gpumem_torch.driver_info()))", fake_env(v), [BINDINGS])
            for v in VERSIONS
        }
        jobs = [("torch", None)] + [(s, v) for v in VERSIONS for s in cls.strategies]
        with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
            futures = {job: pool.submit(train, job[0], fake_env(job[1]) if job[1] else clean_env(PYTHONUNBUFFERED="1")) for job in jobs}
        cls.results = {job: f.result() for job, f in futures.items()}

    def test_the_interposer_reports_each_version(self):
        for v in VERSIONS:
            self.assertTrue(self.info[v]["loaded"], self.info[v]["failure"])
            self.assertEqual(self.info[v]["version"], v)

    def test_cuda_12_0_refuses_only_what_needs_a_newer_driver(self):
        refused = sorted(k for k, r in self.info[12000]["refused"].items() if r is not None)
        self.assertEqual(refused, ["tiered"])
        for v in (12040, 12080):
            self.assertEqual([k for k, r in self.info[v]["refused"].items() if r is not None], [], v)

    def test_supported_strategies_train_like_pytorch(self):
        ref = self.results[("torch", None)]
        self.assertTrue(ref["ok"], ref.get("traceback"))
        for v in VERSIONS:
            for s in self.strategies:
                if self.info[v]["refused"].get(s) is not None:
                    continue
                with self.subTest(version=v, strategy=s):
                    r = self.results[(s, v)]
                    self.assertTrue(r["ok"], r.get("traceback"))
                    self.assertEqual(r["returncode"], 0)
                    self.assertEqual(r["driver_version"], v)
                    self.assertTrue(r["config"].startswith(f"strategy={s} "), r["config"])
                    self.assertEqual(r["losses"], ref["losses"])
                    self.assertEqual(r["accounting_allocated"], r["accounting_expected"])
                    self.assertEqual(r["final_allocated"], 0)
                    self.assertEqual(r["final_stats"]["gpumem.bad_frees"], 0)
                    self.assertEqual(r["final_stats"]["gpumem.alloc_errors"], 0)

    def test_the_others_are_refused_by_name(self):
        seen = 0
        for v in VERSIONS:
            for s, need in self.info[v]["refused"].items():
                if need is None or s not in self.strategies:
                    continue
                seen += 1
                with self.subTest(version=v, strategy=s):
                    r = self.results[(s, v)]
                    self.assertFalse(r["ok"])
                    self.assertTrue(r["error"].startswith("DriverUnsupportedError: "), r["error"])
                    self.assertIn(f"strategy '{s}' needs {need['what']}", r["error"])
                    self.assertIn(f"CUDA {need['version'] // 1000}.{need['version'] % 1000 // 10}", r["error"])
                    self.assertIn(f"supports CUDA {v // 1000}.{v % 1000 // 10}", r["error"])
        self.assertGreater(seen, 0, "no version refused anything: the interposer was not in place")


if __name__ == "__main__":
    unittest.main()
