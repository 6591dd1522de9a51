"""gpumem_torch.diagnose_ooms(): the observer PyTorch calls at its own out-of-memory failures.

- Without a GPU: the observer function called as PyTorch calls it, fn(device, alloc, device_alloc,
  device_free), with a recorded snapshot (the corpus's, as a dict) standing for
  torch.cuda.memory._snapshot(): the verdict printed and kept, the capacity capped at device_alloc,
  the time bound, and its own failures as one line that never raises.
- With PyTorch on a CUDA device (GpuTests, skipped with the reason otherwise): a real OOM under a
  set_per_process_memory_fraction cap, in a fresh interpreter; the verdict printed on stderr before
  PyTorch's OutOfMemoryError, which still reaches the program.
"""

import gzip
import io
import os
import subprocess
import sys
import unittest

from support import library_reason, torch_cuda_reason

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PACKAGE_ROOT))
SNAPSHOT = os.path.join(REPO, "bench", "traces", "seed_gcn.torch.pickle.gz")
GIB = 1 << 30

LIB_REASON = library_reason()
GPU_REASON = LIB_REASON or torch_cuda_reason()
if GPU_REASON:
    print(f"[test_diagnose_ooms] GpuTests skipped: {GPU_REASON}", file=sys.stderr)


def recorded_snapshot():
    from gpumem_torch import _snapshot

    with gzip.open(SNAPSHOT) as f:
        return _snapshot.unpickle(f.read(), SNAPSHOT)


@unittest.skipIf(LIB_REASON, LIB_REASON)
class ObserverTests(unittest.TestCase):
    def setUp(self):
        from gpumem_torch import _observer

        self.observer = _observer
        self.out = io.StringIO()
        _observer.set_enabled_for_test(True)

    def tearDown(self):
        self.observer.set_enabled_for_test(False)

    def call(self, snapshot_fn, device_alloc, device_free=GIB):
        on_oom = self.observer.make_observer(snapshot_fn, lambda: self.out)
        self.assertIsNone(on_oom(0, 512 << 20, device_alloc, device_free))
        return self.out.getvalue()

    def test_verdict_printed_and_kept(self):
        import gpumem_torch

        text = self.call(recorded_snapshot, 16 * GIB)
        self.assertIn("the doctor's verdict at 16.00 GiB: real", text)
        self.assertIn("No allocator setting serves", text)
        d = gpumem_torch.last_oom_diagnosis()
        self.assertEqual(d["verdict"]["kind"], "real")
        self.assertEqual(d["request_bytes"], 512 << 20)
        self.assertEqual(d["verdict"]["capacityBytes"], 16 * GIB)  # the snapshot records no OOM: device_alloc

    def test_fitting_capacity_names_settings(self):
        import gpumem_torch

        self.call(recorded_snapshot, 1 << 40)  # past every need: the bands
        verdict = gpumem_torch.last_oom_diagnosis()["verdict"]
        self.assertEqual(verdict["kind"], "fits")
        self.assertIsNone(gpumem_torch.last_oom_diagnosis()["expandable_segments_fits"])  # the default fitted: not asked
        # between the live bytes' band and the twin's: fragmentation, and which settings serve
        low = verdict["liveBytes"] + verdict["uncertainty"]["outside"]["highBytes"]
        capacity = (low + verdict["pytorch"]["band"]["lowBytes"]) // 2
        text = self.call(recorded_snapshot, capacity)
        d = gpumem_torch.last_oom_diagnosis()
        self.assertEqual(d["verdict"]["kind"], "fragmentation")
        self.assertIsInstance(d["expandable_segments_fits"], bool)
        self.assertEqual("expandable_segments:True would likely have served" in text, d["expandable_segments_fits"])
        best = d["verdict"]["best"]
        if best["fits"]:
            self.assertIn(f"gpumem_torch.enable({best['label'].split(' ')[0]!r})", text)

    def test_own_failure_is_one_line_and_never_raises(self):
        def broken():
            raise RuntimeError("no history recorded\nsecond line")

        text = self.call(broken, 16 * GIB)
        self.assertEqual(text, "gpumem: diagnose_ooms could not diagnose this out-of-memory failure: RuntimeError: no history recorded\n")
        text = self.call(lambda: {"segments": [], "device_traces": [[]]}, 16 * GIB)
        self.assertIn("no allocation history", text.splitlines()[-1])

    def test_time_bound(self):
        self.observer.set_enabled_for_test(True, time_limit_ms=1)
        snapshot = recorded_snapshot()

        def slow():
            import time

            time.sleep(0.01)  # the bound covers the replays: past it before the first
            return snapshot

        self.assertIn("DeadlineExceeded", self.call(slow, 16 * GIB))

    def test_disabled_does_nothing(self):
        self.observer.set_enabled_for_test(False)
        self.assertEqual(self.call(recorded_snapshot, 16 * GIB), "")


GPU_CODE = r"""
import sys, torch, gpumem_torch
gpumem_torch.diagnose_ooms(record_history=True)
torch.cuda.set_per_process_memory_fraction(2 * 2**30 / torch.cuda.get_device_properties(0).total_memory)
kept = []
try:
    for _ in range(64):
        kept.append(torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda"))
    print("NO_OOM")
except torch.cuda.OutOfMemoryError:
    d = gpumem_torch.last_oom_diagnosis()
    print("OOM_RAISED", d["verdict"]["kind"], d["verdict"]["capacityBytes"])
"""


@unittest.skipIf(GPU_REASON, GPU_REASON)
class GpuTests(unittest.TestCase):
    def test_real_oom_under_fraction_cap(self):
        env = dict(os.environ, PYTHONPATH=PACKAGE_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        proc = subprocess.run([sys.executable, "-c", GPU_CODE], capture_output=True, text=True, env=env, timeout=300)
        self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
        self.assertIn("OOM_RAISED real", proc.stdout)  # 2 GiB allowed, the program holds 2 GiB and asks for more
        self.assertIn("the doctor's verdict at", proc.stderr)
        self.assertIn(": real", proc.stderr)
        self.assertNotIn("could not diagnose", proc.stderr)


if __name__ == "__main__":
    unittest.main()
