"""The drop-in shapes over gpumem on a CUDA device (npm run test:torch), each case in a process of its
own (dropin_worker.py): vLLM's tests/basic_correctness/test_cumem.py cases (test_python_error,
test_basic_cumem, test_cumem_with_cudagraph; its test_end_to_end needs vLLM itself, which is not
installed on the GPU hosts) written again against gpumem_torch.tagged_pool.TaggedPool, and the saver's
state machine and a paused CUDA graph against gpumem_torch.saver. torch_memory_saver's own tests run
against the saver by bench/sleep/peer_tests.py.

Without PyTorch on a CUDA device, or without the built library, they are skipped with the reason.
"""

import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from support import clean_env, skip_reasons, worker_result  # noqa: E402

_, TORCH_REASON = skip_reasons("test_dropin_gpu", "GPU tests")

MiB = 1 << 20


def run_worker(mode, timeout=600):
    proc = subprocess.run(
        [sys.executable, os.path.join(HERE, "dropin_worker.py"), mode], capture_output=True, text=True, env=clean_env(PYTHONUNBUFFERED="1"), timeout=timeout
    )
    result = worker_result(proc.stdout)
    if result is None:
        raise AssertionError(f"dropin_worker {mode} printed no result (exit {proc.returncode})\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}")
    if "exception" in result:
        raise AssertionError(f"dropin_worker {mode} failed:\n{result['exception']}\nstderr:\n{proc.stderr[-2000:]}")
    return result


@unittest.skipIf(TORCH_REASON, TORCH_REASON or "")
class TaggedPoolGpuTests(unittest.TestCase):
    def test_python_error(self):
        r = run_worker("pool_error")
        self.assertIsNotNone(r["wake_error"], "wake_up found room it should not have")
        self.assertEqual(r["wake_error"][0], "OutOfMemoryError")
        self.assertTrue(r["is_torch_oom"])
        self.assertEqual(r["still_asleep"], [True])  # nothing half done
        self.assertIsNone(r["wake_after_room"])
        self.assertTrue(r["usable"])

    def test_basic(self):
        r = run_worker("pool_basic")
        self.assertTrue(r["before"] and r["after"])
        self.assertEqual(r["usage"], 2 * 4 * MiB)
        self.assertGreater(r["freed"], 0)

    def test_with_cudagraph(self):
        r = run_worker("pool_graph")
        self.assertGreater(r["freed"], 0)
        self.assertTrue(r["cache"])
        self.assertTrue(r["output"])


@unittest.skipIf(TORCH_REASON, TORCH_REASON or "")
class SaverGpuTests(unittest.TestCase):
    def test_states(self):
        r = run_worker("saver_states")
        self.assertGreaterEqual(r["freed_kv"], 256 * MiB * 0.95)
        self.assertEqual(r["pause_paused"][0], "InvalidStateError")
        self.assertIn("'kv_cache' is paused already", r["pause_paused"][1])
        self.assertEqual(r["resume_awake"][0], "InvalidStateError")
        self.assertIsNone(r["pause_unknown"])  # as the peer: a tag without allocations is nothing to do
        self.assertTrue(r["same_ptr"])
        self.assertTrue(r["weights_kept"])
        self.assertTrue(r["backup"])
        self.assertTrue(r["no_backup"])
        self.assertTrue(r["after_resume"])
        self.assertTrue(r["kv_usable"])
        self.assertEqual(r["resume_resumed"][0], "InvalidStateError")

    def test_cuda_graph_replayed_after_its_cache_resumed(self):
        r = run_worker("saver_graph")
        self.assertEqual(r["first"], 101)
        self.assertGreaterEqual(r["freed"], 2_000_000_000 * 0.95)  # the 2 GB KV cache
        self.assertGreaterEqual(r["graph_freed"], 400_000_000 * 0.95)  # the intermediate, cached in its tag
        self.assertEqual(r["second"], 202)


if __name__ == "__main__":
    unittest.main()
